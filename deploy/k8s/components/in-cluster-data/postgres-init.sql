-- Databases of the DreamGym services (run once, on an empty data directory, by the postgres
-- image's entrypoint; used by docker-compose.yml and the dev Kubernetes overlay).
-- One database per service that owns tables; pgvector where retrieval needs it.
CREATE DATABASE replay_store;
CREATE DATABASE task_generator;
\c replay_store
CREATE EXTENSION IF NOT EXISTS vector;
