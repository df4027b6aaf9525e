"""Documents' URIs as file-system paths."""

from __future__ import annotations

from urllib.parse import unquote, urlparse


def uri_to_path(uri: str) -> str | None:
    """The file-system path of a file: URI, else None (untitled documents, other schemes)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    path = unquote(parsed.path)
    if len(path) >= 3 and path[0] == "/" and path[2] == ":":  # file:///c:/x on Windows
        path = path[1:]
    if parsed.netloc:  # UNC path
        path = f"//{parsed.netloc}{path}"
    return path


def workspace_root(
    root_uri: str | None, first_folder_uri: str | None, root_path: str | None
) -> tuple[str | None, str | None]:
    """The workspace's (URI, path) from `initialize`: its rootUri, else its first workspace
    folder; the path of that URI, else the deprecated rootPath."""
    uri = root_uri or first_folder_uri
    path = (uri_to_path(uri) if uri else None) or (root_path or None)
    return uri, path
