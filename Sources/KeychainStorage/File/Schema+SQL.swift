import GRDB

/// The keychain file's tables. Migrations are frozen history: never edit one that has shipped.
enum FileSchema {
    /// Format 2: see docs/FILE-FORMAT.md. Format 1 files are migrated when opened (``FormatMigration``).
    static let formatVersion = 2
    static let readableFormats: ClosedRange<Int> = 1...2

    static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE kc_meta (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        format INTEGER NOT NULL,
                        db_uuid BLOB NOT NULL,
                        db_salt BLOB NOT NULL,
                        pw_salt BLOB NOT NULL,
                        has_password INTEGER NOT NULL,
                        kdf_id INTEGER NOT NULL, kdf_n INTEGER NOT NULL, kdf_r INTEGER NOT NULL, kdf_p INTEGER NOT NULL,
                        keybag_gen INTEGER NOT NULL,
                        epoch INTEGER NOT NULL,
                        item_count INTEGER NOT NULL,
                        set_digest BLOB NOT NULL,
                        manifest_mac BLOB NOT NULL,
                        lock_interval INTEGER NOT NULL,
                        lock_on_sleep INTEGER NOT NULL
                    );
                    CREATE TABLE keybag (
                        class TEXT PRIMARY KEY,
                        key_gen INTEGER NOT NULL,
                        wrap TEXT NOT NULL,
                        blob BLOB NOT NULL
                    );
                    CREATE TABLE items (
                        rowid INTEGER PRIMARY KEY,
                        uuid BLOB NOT NULL UNIQUE,
                        kind TEXT NOT NULL,
                        class TEXT NOT NULL,
                        sync INTEGER NOT NULL,
                        gen INTEGER NOT NULL,
                        primary_index BLOB NOT NULL,
                        group_index BLOB NOT NULL,
                        account_index BLOB NOT NULL,
                        service_index BLOB NOT NULL,
                        meta BLOB NOT NULL,
                        wrapped_key BLOB NOT NULL,
                        secret BLOB NOT NULL,
                        UNIQUE (kind, primary_index)
                    );
                    CREATE INDEX items_by_service ON items (kind, service_index, account_index);
                    CREATE INDEX items_by_account ON items (kind, account_index);
                    """)
        }
        migrator.registerMigration(secretBindingMigration) { db in try db.execute(sql: secretBindingSQL) }
        return migrator
    }

    /// Format 2: a row written by format 1 keeps, in `secret_binding`, the hash of the metadata ciphertext its secret
    /// was sealed against, so the metadata can be sealed again (a password change rotates its key) without the
    /// secret, which format 2 no longer binds to the metadata ciphertext. NULL for rows written by format 2.
    static let secretBindingMigration = "v2-secret-binding"
    static let secretBindingSQL = "ALTER TABLE items ADD COLUMN secret_binding BLOB"
}
