"""Stand-in for ``nvidia-cuda-mps-control`` at the process boundary, for machines without a GPU.

Like the real program: ``-d`` forks a daemon into the background and returns; the daemon writes
``nvidia-cuda-mps-control.pid`` into ``$CUDA_MPS_PIPE_DIRECTORY``, logs to
``$CUDA_MPS_LOG_DIRECTORY/control.log`` and starts one child "server"; without arguments the
program forwards its stdin commands (``get_server_list``, ``get_client_list PID``, ``quit``) to
the daemon. ``FAKE_MPS_FAIL=1`` makes ``-d`` fail, ``FAKE_MPS_IGNORE_QUIT=1`` makes the daemon
ignore ``quit`` (it still dies on SIGTERM), ``FAKE_MPS_NO_SERVER=1`` starts no server.
"""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

PIPE = Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/nonexistent-fake-mps"))
LOG = Path(os.environ.get("CUDA_MPS_LOG_DIRECTORY", "/nonexistent-fake-mps"))
PID_FILE = PIPE / "nvidia-cuda-mps-control.pid"
SOCKET = PIPE / "control"


def log(message: str) -> None:
    with open(LOG / "control.log", "a") as handle:
        handle.write(f"[fake-mps] {message}\n")


def serve() -> int:
    server = None if os.environ.get("FAKE_MPS_NO_SERVER") else subprocess.Popen(
        [sys.executable, __file__, "--server"], stdin=subprocess.DEVNULL)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(SOCKET))
    listener.listen()
    PID_FILE.write_text(f"{os.getpid()}\n")
    log("control daemon started")
    while True:
        connection, _ = listener.accept()
        with connection:
            command = connection.recv(4096).decode().strip()
            log(f"command {command!r}")
            if command == "get_server_list":
                connection.sendall(f"{server.pid}\n".encode() if server else b"")
            elif command.startswith("get_client_list"):
                connection.sendall(b"")
            elif command == "quit" and not os.environ.get("FAKE_MPS_IGNORE_QUIT"):
                if server:
                    server.terminate()
                    server.wait()
                PID_FILE.unlink()
                log("exit")
                return 0


def forward(command: str) -> str:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(SOCKET))
    with client:
        client.sendall(command.encode())
        client.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := client.recv(4096):
            reply += chunk
    return reply.decode()


def main(argv: list[str]) -> int:
    if argv[:1] == ["-d"]:
        if os.environ.get("FAKE_MPS_FAIL"):
            log("startup failed: no CUDA-capable device")
            print("fake-mps: cannot start the daemon", file=sys.stderr)
            return 1
        subprocess.Popen([sys.executable, __file__, "--serve"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return 0
    if argv[:1] == ["--serve"]:
        return serve()
    if argv[:1] == ["--server"]:
        while True:
            time.sleep(1)
    for line in sys.stdin:
        if line.strip():
            try:
                sys.stdout.write(forward(line.strip()))
            except OSError as exc:
                print(f"fake-mps: cannot reach the daemon ({exc})", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
