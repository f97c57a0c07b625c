"""placeholder: replaced by the kernel implementation."""
DistanceStats = pairwise_distance_stats = pairwise_distances = None
