"""Where a Client finds its server, key and CA: arguments, then NODUS_URL / NODUS_TOKEN / NODUS_CA, then the
kubeconfig `nodus kubeconfig` prints (at $KUBECONFIG, else ~/.kube/config).

The standard library has no YAML, so this reads the block-style subset kubeconfigs are written in (nodus's own, as
src/server/Bootstrap.ts `kubeconfig` prints it, and kubectl's): mappings, lists of mappings, plain or quoted scalars.
"""

import base64
import json
import os

from .errors import ConfigurationError

_HOW = "set NODUS_URL and NODUS_TOKEN, pass base_url= and token=, or write a kubeconfig with `nodus kubeconfig > ~/.kube/config`"


def _scalar(text):
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return text[1:-1].replace("''", "'")
    if " #" in text:
        text = text.split(" #", 1)[0].rstrip()
    if text in ("", "~", "null"):
        return None
    return text


def _lines(text):
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped == "" or stripped.startswith("#") or stripped == "---":
            continue
        yield len(raw) - len(raw.lstrip(" ")), stripped


def parse_yaml(text):
    """A block-style YAML document of mappings, lists and scalars (what kubeconfigs hold) as Python values."""
    lines = list(_lines(text))
    value, index = _block(lines, 0, 0)
    if index != len(lines):
        raise ValueError("unexpected indentation at %r" % lines[index][1])
    return value


def _block(lines, index, indent):
    if index >= len(lines):
        return None, index
    if lines[index][1].startswith("- ") or lines[index][1] == "-":
        return _list(lines, index, lines[index][0])
    return _mapping(lines, index, lines[index][0]) if lines[index][0] >= indent else (None, index)


def _list(lines, index, indent):
    items = []
    while index < len(lines) and lines[index][0] == indent and (lines[index][1].startswith("- ") or lines[index][1] == "-"):
        rest = lines[index][1][1:].lstrip()
        if rest == "":
            item, index = _block(lines, index + 1, indent + 1)
        elif ":" in rest and not rest.startswith(('"', "'")):
            # "- name: x" opens a mapping whose keys sit where "name" does.
            inner = indent + (len(lines[index][1]) - len(rest))
            lines[index] = (inner, rest)
            item, index = _mapping(lines, index, inner)
        else:
            item, index = _scalar(rest), index + 1
        items.append(item)
    return items, index


def _mapping(lines, index, indent):
    result = {}
    while index < len(lines) and lines[index][0] == indent and not lines[index][1].startswith("- "):
        key, sep, rest = lines[index][1].partition(":")
        if sep == "":
            raise ValueError("expected `key: value` at %r" % lines[index][1])
        key = _scalar(key)
        if rest.strip() == "":
            nested = index + 1 < len(lines) and (
                lines[index + 1][0] > indent or (lines[index + 1][0] == indent and lines[index + 1][1].startswith("- ")))
            if nested:
                result[key], index = _block(lines, index + 1, indent)
            else:
                result[key], index = None, index + 1
        else:
            result[key], index = _scalar(rest), index + 1
    return result, index


def _named(entries, name, what, path):
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry.get(what) or {}
    raise ConfigurationError("kubeconfig %s names %s %r, which it does not define; %s" % (path, what, name, _HOW))


def read_kubeconfig(path):
    """{server, token, ca (PEM text or a file path), namespace} of the kubeconfig's current context."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = parse_yaml(handle.read())
    except OSError as error:
        raise ConfigurationError("cannot read kubeconfig %s: %s; %s" % (path, error.strerror, _HOW)) from None
    except ValueError as error:
        raise ConfigurationError("kubeconfig %s is not a kubeconfig: %s; %s" % (path, error, _HOW)) from None
    if not isinstance(document, dict):
        raise ConfigurationError("kubeconfig %s is not a kubeconfig; %s" % (path, _HOW))
    contexts = document.get("contexts") or []
    current = document.get("current-context")
    if current is None and len(contexts) == 1 and isinstance(contexts[0], dict):
        current = contexts[0].get("name")
    if current is None:
        raise ConfigurationError("kubeconfig %s has no current-context; %s" % (path, _HOW))
    context = _named(contexts, current, "context", path)
    cluster = _named(document.get("clusters"), context.get("cluster"), "cluster", path)
    user = _named(document.get("users"), context.get("user"), "user", path)
    ca = None
    if cluster.get("certificate-authority-data"):
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode("ascii")
    elif cluster.get("certificate-authority"):
        ca = os.path.join(os.path.dirname(os.path.abspath(path)), cluster["certificate-authority"])
    return {"server": cluster.get("server"), "token": user.get("token"), "ca": ca, "namespace": context.get("namespace")}


def kubeconfig_path(explicit=None):
    if explicit is not None:
        return explicit
    env = os.environ.get("KUBECONFIG")
    if env:
        return env.split(os.pathsep)[0]
    return os.path.join(os.path.expanduser("~"), ".kube", "config")


def resolve(base_url=None, token=None, ca=None, kubeconfig=None):
    """{base_url, token, ca, namespace}: each from its argument, else the environment, else the kubeconfig."""
    base_url = base_url or os.environ.get("NODUS_URL") or None
    token = token or os.environ.get("NODUS_TOKEN") or None
    ca = ca or os.environ.get("NODUS_CA") or None
    namespace = None
    path = kubeconfig_path(kubeconfig)
    if base_url is None or token is None or kubeconfig is not None:
        if kubeconfig is not None or os.path.exists(path):
            found = read_kubeconfig(path)
            base_url = base_url or found["server"]
            token = token or found["token"]
            ca = ca or found["ca"]
            namespace = found["namespace"]
    if not base_url:
        raise ConfigurationError("no server URL: %s" % _HOW)
    if not token:
        raise ConfigurationError("no API key for %s: %s" % (base_url, _HOW))
    if not (base_url.startswith("http://") or base_url.startswith("https://")):
        raise ConfigurationError("server URL %r is not http(s)://host:port" % base_url)
    return {"base_url": base_url.rstrip("/"), "token": token, "ca": ca, "namespace": namespace}
