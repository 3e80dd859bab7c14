-- One database per service that owns tables; pgvector enabled where retrieval needs it.
CREATE DATABASE replay_store;
CREATE DATABASE task_generator;
\c replay_store
CREATE EXTENSION IF NOT EXISTS vector;
