"""Partitionable slots carving dynamic slots (manual: Dynamic Provisioning; Defaults for
Partitionable Slot Sizes; consumption policies)."""

from __future__ import annotations

from slotkit import conf, host

from startd import slots
from startd.classad import parse_ad


def _setup(text: str = "", **h: int):
    c = conf(text)
    lay = slots.build_layout(c, host(**h))
    return c, lay, lay.slots[0]


def test_carve_rounds_requests_by_modify_request_exprs_and_gives_the_disk_asked_for() -> None:
    c, lay, p = _setup()
    job = parse_ad("[ RequestCpus = 3; RequestMemory = 1000; RequestDisk = 10240 ]")
    got = slots.carve(p, p.resources, job, None, c, layout=lay)
    assert isinstance(got, slots.Resources)
    assert (got.cpus, got.memory) == (3, 1024)  # quantize(RequestMemory, {128})
    # quantize(RequestDisk, {1024}); create_dslot's num_disk is the request itself (no PROVISION_FRACTIONAL_DISK)
    assert got.disk == 10240


def test_leftovers_of_the_partitionable_slot() -> None:
    c, lay, p = _setup()
    job = parse_ad("[ RequestCpus = 3; RequestMemory = 1024; RequestDisk = 10240 ]")
    got = slots.carve(p, p.resources, job, None, c, layout=lay)
    assert isinstance(got, slots.Resources)
    left = slots.take(p.resources, got)
    assert (left.cpus, left.memory, left.disk) == (5, 16384 - 1024, 100_000_000 - 10240)
    assert left.swap == p.resources.swap
    assert slots.give_back(left, got) == p.resources


def test_modify_request_expr_is_configurable_and_sees_the_job_as_my() -> None:
    c, lay, p = _setup("MODIFY_REQUEST_EXPR_REQUESTMEMORY = quantize(MY.RequestMemory, {1000})")
    job = parse_ad("[ RequestCpus = 1; RequestMemory = 1001; RequestDisk = 1 ]")
    got = slots.carve(p, p.resources, job, None, c, layout=lay)
    assert isinstance(got, slots.Resources) and got.memory == 2000


def test_rounded_request_that_no_longer_fits_falls_back_to_the_job_request() -> None:
    c, lay, p = _setup(memory=1100)
    job = parse_ad("[ RequestCpus = 1; RequestMemory = 1100; RequestDisk = 1 ]")
    got = slots.carve(p, p.resources, job, None, c, layout=lay)
    assert isinstance(got, slots.Resources) and got.memory == 1100


def test_must_modify_request_exprs_refuses_instead() -> None:
    c, lay, p = _setup("MUST_MODIFY_REQUEST_EXPRS = True", memory=1100)
    job = parse_ad("[ RequestCpus = 1; RequestMemory = 1100; RequestDisk = 1 ]")
    got = slots.carve(p, p.resources, job, None, c, layout=lay)
    assert got == "the job requests 1152 MB of memory; slot1 has 1100 MB left"


def test_request_cpus_defaults_to_one_when_the_slot_matches_anyway() -> None:
    c, lay, p = _setup()
    ad = parse_ad("[ Requirements = true ]")
    got = slots.carve(p, p.resources, parse_ad("[ RequestMemory = 1; RequestDisk = 1 ]"), ad, c, layout=lay)
    assert isinstance(got, slots.Resources) and got.cpus == 1


def test_without_request_cpus_within_resource_limits_does_not_match() -> None:
    c, lay, p = _setup()
    got = slots.carve(p, p.resources, parse_ad("[ RequestMemory = 1; RequestDisk = 1 ]"), None, c, layout=lay)
    assert got == "slot1's Requirements are not satisfied by the job"


def test_missing_memory_or_disk_request_is_refused() -> None:
    c, lay, p = _setup()
    assert "RequestMemory" in str(slots.carve(p, p.resources, parse_ad("[ RequestDisk = 1 ]"), None, c, layout=lay))
    assert "RequestDisk" in str(slots.carve(p, p.resources, parse_ad("[ RequestMemory = 1 ]"), None, c, layout=lay))


def test_refusal_names_the_resource_that_does_not_fit() -> None:
    c, lay, p = _setup(cpus=4)
    job = parse_ad("[ RequestCpus = 8; RequestMemory = 1; RequestDisk = 1 ]")
    assert slots.carve(p, p.resources, job, None, c, layout=lay) == "the job requests 8 cpus; slot1 has 4 left"


def test_requirements_of_the_slot_ad_are_checked() -> None:
    c, lay, p = _setup()
    ad = parse_ad("[ START = TARGET.Owner == \"alice\"; Requirements = START && WithinResourceLimits ]")
    job = parse_ad("[ Owner = \"bob\"; RequestCpus = 1; RequestMemory = 1; RequestDisk = 1 ]")
    assert slots.carve(p, p.resources, job, ad, c, layout=lay) == "slot1's Requirements are not satisfied by the job"
    job["Owner"] = "alice"
    assert isinstance(slots.carve(p, p.resources, job, ad, c, layout=lay), slots.Resources)


def test_static_slots_are_not_carved() -> None:
    c, lay, p = _setup("NUM_SLOTS = 2\nSLOT_TYPE_0_PARTITIONABLE = False")
    assert "not a partitionable slot" in str(slots.carve(p, p.resources, parse_ad("[]"), None, c, layout=lay))


def test_custom_resources_are_carved_with_their_ids() -> None:
    c, lay, p = _setup("MACHINE_RESOURCE_GPUs = CUDA0, CUDA1, CUDA2")
    job = parse_ad("[ RequestCpus = 1; RequestMemory = 1; RequestDisk = 1; RequestGPUs = 2 ]")
    got = slots.carve(p, p.resources, job, None, c, layout=lay)
    assert isinstance(got, slots.Resources) and got.custom == {"GPUs": 2}
    first = slots.dynamic_slot(p, 1, got, slots.take_ids(p, [], got))
    assert first.custom_ids == {"GPUs": ("CUDA0", "CUDA1")}
    left = slots.take(p.resources, got)
    job["RequestGPUs"] = 2
    assert slots.carve(p, left, job, None, c, layout=lay) == "the job requests 2 GPUs; slot1 has 1 left"
    job["RequestGPUs"] = 1
    got2 = slots.carve(p, left, job, None, c, layout=lay)
    assert isinstance(got2, slots.Resources)
    assert slots.take_ids(p, [first], got2) == {"GPUs": ("CUDA2",)}


def test_jobs_without_custom_requests_get_none_of_them() -> None:
    c, lay, p = _setup("MACHINE_RESOURCE_GPUs = 2")
    job = parse_ad("[ RequestCpus = 1; RequestMemory = 1; RequestDisk = 1 ]")
    got = slots.carve(p, p.resources, job, None, c, layout=lay)
    assert isinstance(got, slots.Resources) and got.custom == {"GPUs": 0}


def test_dynamic_slot_naming_and_id_reuse() -> None:
    ids = slots.DynamicSlotIds()
    assert [ids.next(), ids.next(), ids.next()] == [1, 2, 3]
    ids.release(1)
    assert ids.next() == 1
    assert ids.next() == 4
    c, lay, p = _setup()
    d = slots.dynamic_slot(p, 2, slots.Resources(cpus=1, memory=1, disk=1))
    # create_dslot: a dynamic slot has its parent's slot type (HTCondor 23.1 and later)
    assert (d.name, d.kind, d.type_id, d.parent) == ("slot1_2", "Dynamic", p.type_id, p)


def test_consumption_policy_sizes_by_consumption_exprs() -> None:
    c, lay, p = _setup("SLOT_TYPE_1 = cpus=8\nSLOT_TYPE_1_PARTITIONABLE = True\nNUM_SLOTS_TYPE_1 = 1\n"
                       "SLOT_TYPE_1_CONSUMPTION_POLICY = True\nSLOT_TYPE_1_CONSUMPTION_MEMORY = 4 * TARGET.RequestCpus\n")
    job = parse_ad("[ RequestCpus = 2; RequestMemory = 1; RequestDisk = 100 ]")
    got = slots.carve(p, p.resources, job, None, c, layout=lay)
    assert isinstance(got, slots.Resources)
    assert (got.cpus, got.memory) == (2, 8)


def test_fractional_cpus_with_minimal_share() -> None:
    c, lay, p = _setup("SLOT_TYPE_1 = min\nSLOT_TYPE_1_PARTITIONABLE = True\nNUM_SLOTS_TYPE_1 = 1")
    assert p.allow_fractional_cpus
