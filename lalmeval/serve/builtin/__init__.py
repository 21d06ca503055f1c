"""The models `lalmeval serve --model NAME` knows by name; each module is imported only when served."""
