"""Pure curriculum logic of the task generator: scoring, sampling, seed selection, generation.

Nothing here does I/O: storage is reached through
:class:`~task_generator.domain.ports.TaskRepository` and the LLM through
:class:`dreamgym.llm.base.LLMBackend`, both injected.
"""
