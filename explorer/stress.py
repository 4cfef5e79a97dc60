"""`python -m explorer.stress`: the stress run against a served app (see `explorer.tools.stress`)."""

from explorer.tools.stress import main

if __name__ == "__main__":
    raise SystemExit(main())
