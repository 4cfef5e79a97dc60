"""`python -m explorer.train`: train the bundled model (see `explorer.tools.training`)."""

from explorer.tools.training.__main__ import main

if __name__ == "__main__":
    main()
