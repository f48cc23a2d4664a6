"""A small service that hangs: a worker thread waits on a lock that is never released, a
fetcher waits for an answer its upstream never sends, a thread pool sits idle, and the main
thread sorts records with a key function that ends up sleeping."""

import concurrent.futures
import socket
import threading
import time

lock = threading.Lock()
lock.acquire()


class Inventory:
    def __init__(self, items):
        self.items = items

    def reorder(self):
        return sorted(self.items, key=lambda item: self.priority(item))

    def priority(self, item):
        if item == "widget":
            wait_for_supplier(item)
        return len(item)


def wait_for_supplier(name):
    deadline = time.time() + 3600
    while time.time() < deadline:
        time.sleep(1)


def audit():
    with lock:
        pass


def upstream(listener):
    """Accepts connections and never answers; then waits for the next one."""
    held = []
    while True:
        conn, _ = listener.accept()
        held.append(conn)


def fetch(port):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"GET /stock\n")
        return s.recv(1024)


listener = socket.create_server(("127.0.0.1", 0))
threading.Thread(target=upstream, args=(listener,), name="upstream", daemon=True).start()
threading.Thread(target=fetch, args=(listener.getsockname()[1],), name="fetcher",
                 daemon=True).start()
pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="pool")
# Four tasks that meet at a barrier start all four workers (an idle one would be reused).
everyone = threading.Barrier(5)
for _ in range(4):
    pool.submit(everyone.wait)
everyone.wait()
threading.Thread(target=audit, name="auditor", daemon=True).start()
Inventory(["gear", "widget", "bolt"]).reorder()
