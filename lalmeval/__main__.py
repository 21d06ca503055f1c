from lalmeval.cli import main

raise SystemExit(main())
