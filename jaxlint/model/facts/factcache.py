"""The memo tables of the JAX facts of one module, owned by one object instead of the model's
``__dict__``: each table is a named slot, so a reader sees every cache the facts keep and who fills
it. ``build_model`` makes one per model (``ModuleModel.facts``); the fact modules read and fill
their own slot, and ``ModuleModel.dispose`` drops it with the model."""

from __future__ import annotations


class FactCache:
    """One module's fact caches; each slot is filled (or created) by the module named beside it."""

    __slots__ = (
        "static_fields",  # pytrees.static_fields: frozenset of attribute names
        "array_fields",  # pytrees.array_fields: frozenset of attribute names
        "loop_records",  # looprecord.record: id(loop) -> LoopRecord
        "quiet",  # Rule.quiet: why rules stayed quiet where they looked (a list, only when asked: "why not")
    )

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, None)
