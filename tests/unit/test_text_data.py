"""The shared loader of real text: the shipped GPTCache file and clear errors for bad files."""

import pytest

from harness.base.errors import BadInput
from harness.base.text_data import GPTCACHE_FILE, texts_from_records


def test_shipped_file_gives_every_origin_and_paraphrase_in_order():
    both = texts_from_records(GPTCACHE_FILE, ("origin", "similar"), "test")
    origins = texts_from_records(GPTCACHE_FILE, ("origin",), "test")
    assert len(origins) == 999 and len(both) == 2 * 999
    assert both[0] == origins[0] and both[2] == origins[1]


@pytest.mark.parametrize(
    "content,needle",
    [
        (None, "text file not found"),
        ("{not json", "not valid JSON"),
        ("[]", "expected a non-empty JSON list"),
        ('[{"answer": "x"}]', "record 0 has no 'origin' string"),
    ],
)
def test_bad_files_are_one_clear_error(tmp_path, content, needle):
    f = tmp_path / "texts.json"
    if content is not None:
        f.write_text(content)
    with pytest.raises(BadInput, match=needle):
        texts_from_records(f, ("origin",), "test")
