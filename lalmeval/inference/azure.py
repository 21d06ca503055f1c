"""Azure OpenAI URLs: a resource root, as Azure's portal and AU-Harness configs give it, becomes the
deployment's path.

Azure serves a model at `https://<resource>.openai.azure.com/openai/deployments/<deployment>/chat/completions
?api-version=<version>`; configs (AU-Harness's among them, through the SDK's `azure_endpoint`) name only
the resource root `https://<resource>.openai.azure.com/` and the deployment as the model. Posting to
`<root>/chat/completions` would be a 404, so a root (or `<root>/openai`) with `api_version` set is
resolved here, the way the OpenAI SDK's Azure client does it. A URL that already holds a path
(`…/openai/deployments/<name>`, the newer `…/openai/v1`, a gateway's own path) is used as it is."""

from __future__ import annotations

from typing import Optional
from urllib.parse import quote, urlsplit, urlunsplit

_ROOTS = ("", "/openai")   # paths of a resource root, with or without Azure's /openai prefix


def is_resource_root(url: str) -> bool:
    """Whether `url` names a host (or its /openai prefix) and no API path."""
    return urlsplit(url).path.rstrip("/") in _ROOTS


def deployment_url(url: str, model: str, api_version: Optional[str]) -> str:
    """The base URL requests go to: with `api_version`, a resource root becomes `<root>/openai/deployments/<model>`."""
    if not api_version or not is_resource_root(url):
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/openai/deployments/{quote(model, safe='')}"))
