"""The models `lalmeval serve --model NAME` knows by name; each module is imported only when served,
so the core never imports faster-whisper or pocketsphinx."""

BUILTIN = {
    "whisper-tiny.en": "lalmeval.serve.builtin.whisper:WhisperTinyEn",
    "pocketsphinx": "lalmeval.serve.builtin.pocketsphinx:PocketsphinxCommands",
    "echo": "lalmeval.serve.builtin.echo:EchoInputs",
    "espeak-ng": "lalmeval.serve.builtin.espeak:EspeakVoice",
    "whisper-espeak": "lalmeval.serve.builtin.espeak:WhisperEspeak",
}
