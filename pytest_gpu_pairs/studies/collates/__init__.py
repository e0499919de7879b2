"""Each reference study's collate: typed records read through the store in, the study's figures and table out."""
