"""Errors raised by the corpus loaders."""


class CorpusError(ValueError):
    """A corpus file, cache or R database is missing, empty, unreadable or malformed,
    or a batching request cannot be met. The message names the file where there is one."""


class FetchError(CorpusError):
    """Downloading or unpacking the Debian package of a corpus failed (no ``apt-get`` or
    ``dpkg-deb``, stale package lists, no network). The message says what to do."""
