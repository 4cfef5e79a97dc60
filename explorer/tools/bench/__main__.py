"""`python -m explorer.tools.bench` (or `python -m explorer.bench`): the whole benchmark."""

from explorer.tools.bench.suite import main

main()
