from lalmeval.cli.commands import main

raise SystemExit(main())
