#!/usr/bin/env python3
"""In-process peers of the keychain's native API, timed per operation.

    inprocess.py secretstorage prefill N   fills the default gnome-keyring collection (needs its D-Bus session)
    inprocess.py secretstorage run N       adds, finds, updates and deletes N items, one line per operation
    inprocess.py secretstorage unlock N    locks the collection and unlocks it with its password, N times
    inprocess.py cryptfile prefill N       the same for Python keyring's CryptFileKeyring (keyrings.cryptfile)
    inprocess.py cryptfile run N

Each timed line is "store <TAB> op <TAB> microseconds", as run.sh records them.
"""
import sys
import time


def secretstorage_store():
    import secretstorage

    connection = secretstorage.dbus_init()
    collection = secretstorage.get_default_collection(connection)
    if collection.is_locked():
        collection.unlock()

    def add(service, account, secret):
        collection.create_item(f"{service} {account}", {"service": service, "account": account}, secret.encode())

    def find(service, account):
        item = next(collection.search_items({"service": service, "account": account}))
        return item.get_secret().decode()

    def update(service, account, secret):
        next(collection.search_items({"service": service, "account": account})).set_secret(secret.encode())

    def delete(service, account):
        next(collection.search_items({"service": service, "account": account})).delete()

    return add, find, update, delete


def secretstorage_unlock(count):
    """Times gnome-keyring's unlock with the password, as the login session does it: the Secret Service's own
    Unlock asks through a prompt window, so this calls the daemon's UnlockWithMasterPassword, which
    gnome-keyring offers for exactly this."""
    import secretstorage
    from jeepney import DBusAddress, new_method_call
    from secretstorage.util import format_secret, open_session

    connection = secretstorage.dbus_init()
    collection = secretstorage.get_default_collection(connection)
    session = open_session(connection)
    internal = DBusAddress("/org/freedesktop/secrets", bus_name="org.freedesktop.secrets",
                           interface="org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface")
    for _ in range(count):
        collection.lock()
        start = time.perf_counter_ns()
        secret = format_secret(session, b"bench-password", "text/plain")
        connection.send_and_get_reply(new_method_call(
            internal, "UnlockWithMasterPassword", "o(oayays)", (collection.collection_path, secret)))
        elapsed = (time.perf_counter_ns() - start) // 1000
        assert not collection.is_locked()
        print(f"secretstorage (in-process)\tunlock\t{elapsed}")


def cryptfile_store():
    from keyrings.cryptfile.cryptfile import CryptFileKeyring

    keyring = CryptFileKeyring()
    keyring.keyring_key = "bench-password"

    def add(service, account, secret):
        keyring.set_password(service, account, secret)

    def find(service, account):
        return keyring.get_password(service, account)

    def delete(service, account):
        keyring.delete_password(service, account)

    return add, find, add, delete


def main():
    store, action, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if (store, action) == ("secretstorage", "unlock"):
        secretstorage_unlock(count)
        return
    add, find, update, delete = {"secretstorage": secretstorage_store, "cryptfile": cryptfile_store}[store]()
    if action == "prefill":
        for i in range(count):
            add("bench-fill", f"fill-account-{i}", f"fill-password-{i}")
        return
    name = {"secretstorage": "secretstorage (in-process)", "cryptfile": "keyring-cryptfile (in-process)"}[store]

    def timed(op, body, i):
        start = time.perf_counter_ns()
        body()
        print(f"{name}\t{op}\t{(time.perf_counter_ns() - start) // 1000}")

    for i in range(1, count + 1):
        timed("add", lambda: add("bench-service", f"inproc-account-{i}", f"password-{i}"), i)
    for i in range(1, count + 1):
        def check():
            assert find("bench-service", f"inproc-account-{i}") == f"password-{i}"
        timed("find", check, i)
    for i in range(1, count + 1):
        timed("update", lambda: update("bench-service", f"inproc-account-{i}", f"changed-{i}"), i)
    for i in range(1, count + 1):
        timed("delete", lambda: delete("bench-service", f"inproc-account-{i}"), i)


if __name__ == "__main__":
    main()
