"""The benchmark's phases, grouped by what they measure; each is a function of the shared ``bench.harness.Bench``
that adds its figures to it, in the order ``bench.measure`` calls them."""
