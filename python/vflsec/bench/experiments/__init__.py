"""The benchmarks, one folder each (see :mod:`vflsec.bench.experiment`)."""
