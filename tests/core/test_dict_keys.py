"""Dict keys: short ASCII keys are decoded through one cache for the process (512 slots,
direct-mapped, a slot replaced on a miss: crates/freight-py/src/decode/keys.rs). Whatever it holds,
each key comes back equal, an exact str, in its order."""

from __future__ import annotations

import threading

import freight

KEYS = [f"k{i}" for i in range(3000)] + ["a", "ab", "abc", "x" * 32, "x" * 33, "é", "ключ", "", "\x00", "k1 "]


def test_many_distinct_keys_evict_each_other_and_come_back_equal():
    # 3,000 short keys in one dict: six for each slot, so most decodes replace a slot's key; a
    # prefix ("ab" of "abc"), keys of 32 (cached) and 33 bytes (not), non-ASCII and empty ones.
    d = {k: i for i, k in enumerate(KEYS)}
    for _ in range(2):
        back = freight.loads(freight.dumps(d))
        assert back == d and list(back) == KEYS
        assert {type(k) for k in back} == {str}


def test_a_key_cached_by_one_payload_serves_the_next():
    for k in KEYS[:700]:
        value = {k: 1, "other": [2]}
        assert freight.loads(freight.dumps(value)) == value


def test_keys_shared_between_dicts_of_a_payload_stay_one_object():
    shared = "a shared key"
    back = freight.loads(freight.dumps([{shared: 1}, {shared: 2}, {"short": 3}, {"short": 4}]))
    assert back == [{shared: 1}, {shared: 2}, {"short": 3}, {"short": 4}]
    first, second = (next(iter(d)) for d in back[:2])
    assert first is second


def test_threads_decoding_keys_at_once_each_get_their_own():
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(300):
                d = {f"t{n}-{i % 97}": i, f"shared{i % 13}": n}
                assert freight.loads(freight.dumps(d)) == d
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
