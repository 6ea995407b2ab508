"""`kb eval`: retrieval quality on gold sets, for our search and for the baselines beside it.

Modules: gold (gold-set formats and what counts as a right answer), metrics (Hit@k, MRR, nDCG,
abstention), indexes (the cached indexes a set runs against), systems (ours and the baselines),
crossval (fitting the ranking model and cross-validating it), run (the command and its report).
"""
