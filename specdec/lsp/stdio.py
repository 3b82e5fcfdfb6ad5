"""Reading the client's messages from stdin on the event loop itself, without a thread per read.

Contract: ``start_io(server)`` serves ``server`` (a pygls ``LanguageServer``) over stdin/stdout as
``server.start_io()`` does, with one difference: stdin is read by an ``asyncio.StreamReader`` on
the event loop (``loop.connect_read_pipe``). Where stdin cannot be read that way (a regular file,
a closed descriptor), it falls back to pygls' own reader.

Why: pygls 2.1 reads stdin with ``run_in_executor`` for every header line and every body, so each
message costs three or four trips to a worker thread and back, and each trip waits for the GIL
that the model thread holds while it decodes. A keystroke sends two messages (``didChange`` and
the completion request), so that was six to eight trips before the handler ran
(``specdec/bench/lsp_profile.py`` measures it: the "to handler" stage).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from threading import Event

from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async

log = logging.getLogger("specdec.lsp")


class LoopReader:
    """pygls' reader interface (``readline``, ``readexactly``) over an ``asyncio.StreamReader``;
    b"" at the end of the stream, as pygls expects."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream

    async def readline(self) -> bytes:
        return await self.stream.readline()

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self.stream.readexactly(n)
        except asyncio.IncompleteReadError:
            return b""


async def _reader(stdin) -> object:
    loop = asyncio.get_running_loop()
    try:
        stream = asyncio.StreamReader(limit=1 << 24)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), stdin)
        return LoopReader(stream)
    except (OSError, ValueError) as e:  # not a pipe, socket or character device
        log.info("stdin is read through a thread (%s)", e)
        return StdinAsyncReader(stdin)


def start_io(server, stdin=None, stdout=None) -> None:
    """Serve over stdio until ``exit`` or the end of stdin (pygls' ``_start_io_async``, but with
    ``LoopReader``)."""
    server._stop_event = Event()
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

    async def main() -> None:
        reader = await _reader(stdin or sys.stdin.buffer)
        await run_async(
            stop_event=server._stop_event,
            reader=reader,
            protocol=server.protocol,
            logger=log,
            error_handler=server.report_server_error,
        )

    try:
        asyncio.run(main())
    except BrokenPipeError:
        log.error("Connection to the client is lost! Shutting down the server.")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
