"""What the helpers of every kind share (client.py's Sandbox and Job, functions.py's Function and FunctionCall): a
handle on one named object of a project, and the API's duration strings. Apart from client.py so that functions.py,
which client.py imports, does not import client.py back.
"""


def _duration(seconds):
    """A duration string for the API ("30s", "1500ms")."""
    if isinstance(seconds, str):
        return seconds
    if float(seconds).is_integer():
        return "%ds" % int(seconds)
    return "%dms" % round(seconds * 1000)


class Handle:
    """One named object of a project that helpers act on."""

    def __init__(self, client, project, name):
        self.client = client
        self.project = project
        self.name = name
