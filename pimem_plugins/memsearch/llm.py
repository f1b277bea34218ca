"""The ``memsearch-llm`` plugin: memsearch's own LLM settings as the model for background work
when the host lends none (``pimem maintenance run``, a session without a host model).

It answers only when memsearch's configuration names a provider (``[llm] provider``, with
``model``, ``base_url`` and ``api_key`` as memsearch reads them, ``env:VAR`` included), and calls
it with memsearch's own client code (``memsearch.compact.summarize_text``): no tools, one message.
"""

from __future__ import annotations

import asyncio

from pimem_core.plugin import HostModel, PimemError, Scope, Settings, hookimpl
from pimem_plugins.memsearch.maintenance import memsearch_config


@hookimpl(trylast=True)
def pimem_provide_model(scope: Scope, settings: Settings) -> HostModel | None:
    llm = memsearch_config(scope).llm
    provider = str(llm.provider or "")
    if not provider:
        return None
    model = str(llm.model or "") or None
    base_url = str(llm.base_url or "") or None
    api_key = str(llm.api_key or "") or None

    def complete(system: str, prompt: str, timeout: float) -> str:
        from memsearch.compact import summarize_text

        # summarize_text sends one user message: the system text leads it.
        call = summarize_text(
            f"{system}\n\n{prompt}" if system else prompt,
            llm_provider=provider,
            model=model,
            base_url=base_url,
            api_key=api_key,
        )
        try:
            return str(asyncio.run(asyncio.wait_for(call, timeout)))
        except TimeoutError:
            raise PimemError(
                f"memsearch's LLM ({provider}) timed out after {timeout:g} s"
            ) from None

    return HostModel(name=f"memsearch:{provider}/{model or 'default'}", complete=complete)
