"""The column names of `gnnstore ingest files` inputs (kept apart so the CLI reads them without torch)."""

KEY_COLUMN = "key"  # a node file's keys (int or str)
LABEL_COLUMN = "y"  # a node file's optional labels
MASK_SUFFIX = "_mask"  # columns ending in it are boolean split masks
SRC_COLUMN, DST_COLUMN = "src", "dst"  # an edge file's ends, as node keys
