"""The resumable-upload protocols as the scripts speak them: tus 1.0.0 at /files/ and the
IETF drafts (Upload-Draft-Interop-Version 3 and later) on POST /upload."""

import base64
import re

from harness.rawhttp import request

TUS_VERSION = "1.0.0"
TUS = {"Tus-Resumable": TUS_VERSION}
OFFSET_OCTET_STREAM = "application/offset+octet-stream"


def b64(text):
    """Base64 of `text` as UTF-8 (undecodable bytes kept as they were), for Upload-Metadata."""
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode()


def filename_metadata(name):
    """The tus Upload-Metadata value that names the upload's file."""
    return f"filename {b64(name)}"


def location_path(value):
    """The path of a Location header (absolute or relative), or None."""
    if not value:
        return None
    match = re.match(r"^(?:https?://[^/]*)?(/[^\s]*)$", value)
    return match.group(1) if match else None


def completeness(version, complete):
    """The IETF header that says whether this request ends the upload: Upload-Incomplete
    (inverted) in interop version 3, Upload-Complete from version 4 on."""
    if version == 3:
        return ("Upload-Incomplete", "?0" if complete else "?1")
    return ("Upload-Complete", "?1" if complete else "?0")


class TusClient:
    """One tus request per call, each on a fresh connection (rawhttp.request)."""

    def __init__(self, port):
        self.port = port

    def create(self, length, filename):
        return request(self.port, "POST", "/files", {**TUS, "Upload-Length": str(length),
                                                     "Upload-Metadata": filename_metadata(filename)})

    def offset(self, location):
        return request(self.port, "HEAD", location, TUS)

    def append(self, location, offset, data, timeout=5.0):
        return request(self.port, "PATCH", location, {**TUS, "Upload-Offset": str(offset),
                                                      "Content-Type": OFFSET_OCTET_STREAM},
                       body=data, timeout=timeout)

    def delete(self, location):
        return request(self.port, "DELETE", location, TUS)
