"""The serving socket: connections accepted by asyncio (as uvicorn accepts them) send without
Nagle's algorithm, so an answer written in two parts (headers, body) is not held for the
client's delayed ACK on a kept-alive connection."""

import asyncio
import socket

from keras_bert_lite.serve.model_server import listening_socket


def test_accepted_connections_have_nagle_off():
    async def accepted_nodelay():
        sock = listening_socket("127.0.0.1")
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        loop = asyncio.get_running_loop()
        seen = loop.create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport):
                accepted = transport.get_extra_info("socket")
                seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await loop.create_server(Probe, sock=sock)
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
            value = await asyncio.wait_for(seen, 10)
            writer.close()
        finally:
            server.close()
        return value

    assert asyncio.run(accepted_nodelay()) != 0
