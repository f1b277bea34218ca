"""Which of the host's models distils a session's exchanges.

The host sends its model catalog; pimem picks, so the rule is the same for every host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from pimem_core.errors import PimemError


@attrs.frozen(kw_only=True)
class ModelRef:
    """One model of the host's catalog, with its price per token of input and output."""

    provider: str
    id: str
    input_cost: float = 0.0
    output_cost: float = 0.0

    @property
    def cost(self) -> float:
        return self.input_cost + self.output_cost


def resolve_capture_model(
    override: str | None, session_model: ModelRef | None, catalog: Sequence[ModelRef]
) -> ModelRef:
    """The model that distils a session's exchanges.

    :param override: ``PI_MEMSEARCH_CAPTURE_MODEL``: ``<provider>/<id>`` (split at the first
        slash, since ids may hold slashes) or a bare ``<id>`` (the first available model with
        that id). A model that is not available is an error, never a fallback.
    :param session_model: the model the session runs on.
    :param catalog: the available models, in the host's order.
    :returns: without an override, the cheapest available model of the session model's
        provider (input plus output cost, ties by id), else the session model itself.
    :raises PimemError: the override names no available model, or there is no model at all.
    """
    if override:
        if "/" in override:
            provider, model_id = override.split("/", 1)
            found = [m for m in catalog if m.provider == provider and m.id == model_id]
        else:
            found = [m for m in catalog if m.id == override]
        if not found:
            raise PimemError(f"capture model '{override}' not found in the model registry")
        return found[0]
    if session_model is None:
        raise PimemError(
            "no model available for distillation: no session model and no "
            "PI_MEMSEARCH_CAPTURE_MODEL set"
        )
    same_provider = [m for m in catalog if m.provider == session_model.provider]
    if not same_provider:
        return session_model
    return min(same_provider, key=lambda m: (m.cost, m.id))


def model_ref_from_json(raw: object) -> ModelRef:
    """A catalog entry as hosts send it: ``{"provider", "id", "input_cost"?, "output_cost"?}``."""
    if not isinstance(raw, Mapping):
        raise PimemError("a model must be an object with a provider and an id")
    provider, model_id = raw.get("provider"), raw.get("id")
    if (
        not isinstance(provider, str)
        or not isinstance(model_id, str)
        or not provider
        or not model_id
    ):
        raise PimemError('a model needs a non-empty "provider" and "id"')
    costs = [raw.get("input_cost", 0), raw.get("output_cost", 0)]
    if not all(isinstance(cost, int | float) and not isinstance(cost, bool) for cost in costs):
        raise PimemError('a model\'s "input_cost" and "output_cost" must be numbers')
    return ModelRef(
        provider=provider, id=model_id, input_cost=float(costs[0]), output_cost=float(costs[1])
    )
