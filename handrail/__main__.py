from handrail.cli import main

raise SystemExit(main())
