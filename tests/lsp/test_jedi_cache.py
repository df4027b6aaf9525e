"""jedi's parse cache after a server was killed while writing it (an editor quitting during the
warm-up): the next server must still get signatures, not fail on the truncated file forever."""

from __future__ import annotations

from pathlib import Path

import parso
import parso.cache
from torchdoctor.lsp.jedi_support import tolerate_truncated_parso_cache


def test_a_truncated_cache_file_is_parsed_afresh(tmp_path):
    source = tmp_path / "stub.pyi"
    source.write_text("def view(self, *shape: int) -> Tensor: ...\n")
    cache = tmp_path / "cache"
    grammar = parso.load_grammar()
    grammar.parse(path=str(source), cache=True, cache_path=cache)
    pickled = Path(parso.cache._get_hashed_path(grammar._hashed, str(source), cache_path=cache))
    assert pickled.exists()
    pickled.write_bytes(pickled.read_bytes()[:5])  # what a kill in mid-write leaves
    parso.cache.parser_cache.clear()  # a new process: nothing in memory

    tolerate_truncated_parso_cache()
    module = grammar.parse(path=str(source), cache=True, cache_path=cache)

    assert module.get_code() == source.read_text()
    assert pickled.stat().st_size > 5  # rewritten whole
