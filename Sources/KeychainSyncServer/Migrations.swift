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
