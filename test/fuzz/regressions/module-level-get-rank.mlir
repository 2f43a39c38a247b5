%r = distributed.get_rank
