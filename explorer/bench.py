"""`python -m explorer.bench`: the benchmark's command (see `explorer.tools.bench`)."""

from explorer.tools.bench.suite import main

if __name__ == "__main__":
    main()
