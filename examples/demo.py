"""A small service that hangs: a worker thread waits on a lock that is never released while
the main thread sorts records with a key function that ends up sleeping."""

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


threading.Thread(target=audit, name="auditor", daemon=True).start()
Inventory(["gear", "widget", "bolt"]).reorder()
