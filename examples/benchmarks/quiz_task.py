"""A small Inspect AI task (pip install 'evalsi[inspect]') for the benchmarks guide."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


@task
def quiz() -> Task:
    return Task(
        dataset=[
            Sample(id="capital", input="What is the capital of France?", target="Paris"),
            Sample(id="sum", input="What is 2 + 3?", target="5"),
        ],
        solver=generate(),
        scorer=includes(),
    )
