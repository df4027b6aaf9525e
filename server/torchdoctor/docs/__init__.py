"""Rule documentation pages (markdown, English and Simplified Chinese), used by hovers, `explain`
and the README table."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

LOCALES = ("en", "zh-CN")


def normalise_locale(locale: str | None) -> str:
    """`zh`, `zh-cn`, `zh_CN.UTF-8` → `zh-CN`; anything else → `en`."""
    if locale and locale.lower().replace("_", "-").startswith("zh"):
        return "zh-CN"
    return "en"


@lru_cache(maxsize=256)
def doc_page(code: str, locale: str = "en") -> str | None:
    """The markdown page of rule `code`, in `locale` when it exists, else in English."""
    folder = resources.files(__package__)
    for candidate in (normalise_locale(locale), "en"):
        page = folder / candidate / f"{code}.md"
        if page.is_file():
            return page.read_text(encoding="utf-8")
    return None


def doc_url(code: str, locale: str = "en") -> str:
    """A link to the page as installed (a file: URI): it opens offline, in the editor itself."""
    folder = resources.files(__package__)
    page = folder / normalise_locale(locale) / f"{code}.md"
    if not page.is_file():
        page = folder / "en" / f"{code}.md"
    return Path(str(page)).resolve().as_uri()


def documented_codes(locale: str) -> set[str]:
    folder = resources.files(__package__) / locale
    if not folder.is_dir():
        return set()
    return {entry.name[:-3] for entry in folder.iterdir() if entry.name.endswith(".md")}
