from cfsim.cli import main

raise SystemExit(main())
