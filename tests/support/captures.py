"""Where recorded provider streams are: ``captures/<dialect>/`` in the repo, and the real recordings
of ``shared/captures-public/<dialect>/`` beside the checkout (or beside the worktrees' folder, for a
``git worktree``). Tests that read the public ones skip cleanly when they are absent."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPO = ROOT / "captures"
_PUBLIC = [ROOT.parent / "shared" / "captures-public", ROOT.parents[1] / "shared" / "captures-public"]
PUBLIC: Path | None = next((p for p in _PUBLIC if p.is_dir()), None)


def sse_files(dialect: str) -> list[Path]:
    """Every ``.sse`` capture of a dialect, the repo's first, then the public ones when present."""
    folders = [REPO / dialect] + ([PUBLIC / dialect] if PUBLIC is not None else [])
    return [path for folder in folders if folder.is_dir() for path in sorted(folder.glob("*.sse"))]
