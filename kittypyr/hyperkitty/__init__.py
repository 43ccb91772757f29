"""Moving a HyperKitty site into kittypyr: ``kittypyr import-hyperkitty CONFIG DATABASE_URL``.

``database`` reads HyperKitty's tables, ``rebuild`` makes mail from its
fields (HyperKitty keeps no original bytes), ``migrate`` stores messages,
votes, tags, favourites and read marks, and ``command`` is the command line.
"""
