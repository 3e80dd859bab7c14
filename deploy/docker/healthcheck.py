#!/usr/bin/env python3
"""Container healthcheck: exit 0 when ``GET <url>`` answers 2xx within the timeout, else 1.

Usage: ``healthcheck URL [TIMEOUT_S]`` (default timeout 3 s). Standard library only, so it runs in
every DreamGym image; docker-compose and the images' HEALTHCHECK use it with ``/readyz``.
"""

import sys
import urllib.error
import urllib.request


def main(argv: list[str]) -> int:
    if not 2 <= len(argv) <= 3:
        sys.stderr.write("usage: healthcheck URL [TIMEOUT_S]\n")
        return 2
    timeout = float(argv[2]) if len(argv) == 3 else 3.0
    try:
        with urllib.request.urlopen(argv[1], timeout=timeout) as response:
            return 0 if 200 <= response.status < 300 else 1
    except (urllib.error.URLError, OSError, ValueError) as exc:
        sys.stderr.write(f"unhealthy: {argv[1]}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
