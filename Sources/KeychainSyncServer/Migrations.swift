import Logging
import PostgresNIO

/// The server's schema, created and migrated at start in one transaction. Migrations are frozen history: never edit
/// one that has shipped; add the next. Several instances starting at once take turns on an advisory lock.
enum Migrations {
    static let all: [(version: Int, sql: [PostgresQuery])] = [
        (1, [
            """
            CREATE TABLE accounts (
                id bytea PRIMARY KEY CHECK (length(id) = 16),
                created timestamptz NOT NULL DEFAULT now(),
                last_seq bigint NOT NULL DEFAULT 0,
                purged_seq bigint NOT NULL DEFAULT 0,
                item_count integer NOT NULL DEFAULT 0
            )
            """,
            """
            CREATE TABLE devices (
                account bytea NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                id bytea NOT NULL CHECK (length(id) = 16),
                signing_key bytea NOT NULL,
                agreement_key bytea NOT NULL,
                revoked boolean NOT NULL DEFAULT false,
                created timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (account, id)
            )
            """,
            """
            CREATE TABLE device_log (
                account bytea NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                seq integer NOT NULL,
                entry bytea NOT NULL,
                signer bytea NOT NULL,
                signature bytea NOT NULL,
                PRIMARY KEY (account, seq)
            )
            """,
            """
            CREATE TABLE items (
                account bytea NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                id bytea NOT NULL CHECK (length(id) = 16),
                epoch integer NOT NULL,
                version bigint NOT NULL,
                seq bigint NOT NULL,
                deleted boolean NOT NULL,
                modified timestamptz NOT NULL,
                ciphertext bytea,
                PRIMARY KEY (account, id),
                CHECK (deleted = (ciphertext IS NULL))
            )
            """,
            "CREATE INDEX items_by_seq ON items (account, seq)",
            """
            CREATE TABLE nonces (
                account bytea NOT NULL,
                nonce bytea NOT NULL,
                expires timestamptz NOT NULL,
                PRIMARY KEY (account, nonce)
            )
            """,
            "CREATE INDEX nonces_by_expiry ON nonces (expires)",
        ]),
        (2, [
            """
            CREATE TABLE joins (
                code text PRIMARY KEY,
                device_id bytea NOT NULL,
                signing_key bytea NOT NULL,
                agreement_key bytea NOT NULL,
                expires timestamptz NOT NULL,
                account bytea REFERENCES accounts (id) ON DELETE CASCADE,
                claim bytea,
                approved boolean NOT NULL DEFAULT false
            )
            """,
            "CREATE INDEX joins_by_expiry ON joins (expires)",
            """
            CREATE TABLE key_shares (
                account bytea NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
                device bytea NOT NULL,
                epoch integer NOT NULL,
                share bytea NOT NULL,
                PRIMARY KEY (account, device, epoch)
            )
            """,
        ]),
        (3, [
            // Tombstones carry a sealed marker now; the account knows its epoch (writes under an older one refused).
            "ALTER TABLE items DROP CONSTRAINT IF EXISTS items_check",
            "ALTER TABLE accounts ADD COLUMN epoch integer NOT NULL DEFAULT 1",
        ]),
        (4, [
            // An item write in one round trip (SyncStore.write says what it does and why). The account's row lock
            // is held only while the database runs it, never across the network: writes to one account queue on
            // that lock, so its length is their throughput. Each statement of a VOLATILE PL/pgSQL function takes a
            // new snapshot (under READ COMMITTED, PostgreSQL's default), so the item read after the lock is granted
            // is the last committed one. Its OUT columns are its interface: a change is a new function
            // (sync_write_v2), so that instances of the version before keep working during a rolling upgrade.
            """
            CREATE FUNCTION sync_write(
                p_account bytea, p_id bytea, p_base bigint, p_epoch integer, p_ciphertext bytea, p_deleted boolean,
                p_nonce bytea, p_nonce_expires timestamptz, p_max_items integer, p_horizon double precision,
                p_channel text,
                OUT outcome text, OUT account_epoch integer, OUT new_version bigint, OUT new_seq bigint,
                OUT cur_epoch integer, OUT cur_version bigint, OUT cur_seq bigint, OUT cur_deleted boolean,
                OUT cur_modified timestamptz, OUT cur_ciphertext bytea)
            LANGUAGE plpgsql VOLATILE AS $$
            DECLARE
                locked accounts%ROWTYPE;
                had_item boolean;
                newest bigint;
                forgotten integer;
            BEGIN
                INSERT INTO nonces (account, nonce, expires) VALUES (p_account, p_nonce, p_nonce_expires)
                ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN outcome := 'replayed'; RETURN; END IF;
                SELECT * INTO locked FROM accounts WHERE id = p_account FOR UPDATE;
                IF NOT FOUND THEN outcome := 'no-account'; RETURN; END IF;
                IF p_epoch < locked.epoch THEN
                    outcome := 'stale-epoch'; account_epoch := locked.epoch; RETURN;
                END IF;
                SELECT i.epoch, i.version, i.seq, i.deleted, i.modified, i.ciphertext
                INTO cur_epoch, cur_version, cur_seq, cur_deleted, cur_modified, cur_ciphertext
                FROM items i WHERE i.account = p_account AND i.id = p_id;
                had_item := FOUND;
                IF coalesce(cur_version, 0) <> p_base THEN outcome := 'conflict'; RETURN; END IF;
                IF NOT had_item THEN
                    IF p_deleted THEN outcome := 'conflict'; RETURN; END IF;
                    IF locked.item_count >= p_max_items THEN outcome := 'account-full'; RETURN; END IF;
                END IF;
                -- Accepted: the item as it was goes back to nobody (it may be a MiB of ciphertext).
                cur_epoch := NULL; cur_version := NULL; cur_seq := NULL; cur_deleted := NULL;
                cur_modified := NULL; cur_ciphertext := NULL;
                new_seq := locked.last_seq + 1;
                new_version := p_base + 1;
                INSERT INTO items (account, id, epoch, version, seq, deleted, modified, ciphertext)
                VALUES (p_account, p_id, p_epoch, new_version, new_seq, p_deleted, now(), p_ciphertext)
                ON CONFLICT (account, id) DO UPDATE SET epoch = EXCLUDED.epoch, version = EXCLUDED.version,
                    seq = EXCLUDED.seq, deleted = EXCLUDED.deleted, modified = EXCLUDED.modified,
                    ciphertext = EXCLUDED.ciphertext;
                UPDATE accounts SET last_seq = new_seq,
                    item_count = item_count + CASE WHEN had_item THEN 0 ELSE 1 END
                WHERE id = p_account;
                IF p_deleted THEN
                    WITH gone AS (
                        DELETE FROM items WHERE account = p_account AND deleted
                          AND modified < now() - make_interval(secs => p_horizon)
                        RETURNING seq
                    )
                    SELECT max(seq), count(*) INTO newest, forgotten FROM gone;
                    IF newest IS NOT NULL THEN
                        UPDATE accounts SET purged_seq = GREATEST(purged_seq, newest),
                            item_count = item_count - forgotten
                        WHERE id = p_account;
                    END IF;
                END IF;
                PERFORM pg_notify(p_channel, encode(p_account, 'hex'));
                outcome := 'accepted';
            END
            $$
            """,
        ]),
    ]

    /// Brings the database to the newest schema; returns the versions applied now.
    @discardableResult
    static func run(on client: PostgresClient, logger: Logger) async throws -> [Int] {
        try await client.withTransaction(logger: logger) { connection in
            // One instance migrates at a time; the others wait here and then find nothing left to do.
            try await connection.query("SELECT pg_advisory_xact_lock(7277326582)", logger: logger)
            try await connection.query("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY,
                    applied timestamptz NOT NULL DEFAULT now()
                )
                """, logger: logger)
            var applied = Set<Int>()
            for try await version in try await connection.query("SELECT version FROM schema_migrations",
                                                                 logger: logger).decode(Int.self) {
                applied.insert(version)
            }
            var now: [Int] = []
            for migration in all where !applied.contains(migration.version) {
                for statement in migration.sql { try await connection.query(statement, logger: logger) }
                try await connection.query("INSERT INTO schema_migrations (version) VALUES (\(migration.version))",
                                           logger: logger)
                now.append(migration.version)
            }
            if !now.isEmpty { logger.info("schema migrated", metadata: ["versions": "\(now)"]) }
            return now
        }
    }
}
