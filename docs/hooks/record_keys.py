"""MkDocs hook: the result-keys page is written from ``pytest_gpu_pairs.record.keys`` at build time,
so the documentation cannot drift from the record model."""
from pytest_gpu_pairs.record.keys import markdown_table


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri == "record-keys.md":
        return markdown_table()
    return markdown
