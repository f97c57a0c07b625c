"""vflsec's benchmarks: one runner (:mod:`.runner`) and a folder per benchmark
(:mod:`.experiments`). Imports nothing: ``vflsec bench NAME`` loads only what it runs."""
