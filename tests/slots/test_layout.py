"""How the configuration divides the machine into slots (manual: Dividing System Resources)."""

from __future__ import annotations

import pytest

from startd import config, slots
from startd.config import ConfigError

from slotkit import host, layout


def test_default_is_one_partitionable_slot_of_type_0_holding_everything() -> None:
    # slot_builder.cpp countTypes: no NUM_SLOTS_TYPE_<N>: NUM_SLOTS (default 1) slots of type 0, partitionable
    lay = layout()
    assert len(lay.slots) == 1
    s = lay.slots[0]
    assert (s.name, s.kind, s.type_id) == ("slot1", "Partitionable", 0)
    assert s.resources.cpus == 8 and s.resources.memory == 16384
    assert s.resources.disk == 100_000_000 and s.resources.swap == 2_000_000


def test_num_slots_divides_the_machine_evenly_into_partitionable_slots() -> None:
    # countTypes: SLOT_TYPE_0_PARTITIONABLE defaults to true (SlotType::init_types), so NUM_SLOTS = N
    # without slot types gives N partitionable slots, each an even share
    lay = layout("NUM_SLOTS = 4")
    assert [s.name for s in lay.slots] == ["slot1", "slot2", "slot3", "slot4"]
    for s in lay.slots:
        assert s.kind == "Partitionable" and s.type_id == 0
        assert (s.resources.cpus, s.resources.memory, s.resources.disk) == (2, 4096, 25_000_000)


def test_num_slots_with_slot_type_0_not_partitionable_gives_static_slots() -> None:
    lay = layout("NUM_SLOTS = 4\nSLOT_TYPE_0_PARTITIONABLE = False")
    assert [(s.kind, s.type_id) for s in lay.slots] == [("Static", 0)] * 4
    # without NUM_SLOTS, one static slot per cpu
    assert len(layout("SLOT_TYPE_0_PARTITIONABLE = False").slots) == 8


def test_num_slots_cannot_exceed_the_cpus() -> None:
    with pytest.raises(ConfigError, match="over-committed on cpus"):
        layout("NUM_SLOTS = 9")


@pytest.mark.parametrize("share", ["1/4", "25%", "cpus=1/4, memory=25%, disk=25%, swap=25%",
                                   "c=2, m=4096, d=1/4, s=1/4", "cpus=2, 25%"])
def test_share_forms_fraction_percent_absolute_and_blanket(share: str) -> None:
    lay = layout(f"SLOT_TYPE_1 = {share}\nNUM_SLOTS_TYPE_1 = 4")
    assert len(lay.slots) == 4
    for s in lay.slots:
        assert (s.resources.cpus, s.resources.memory) == (2, 4096)
        assert s.resources.disk == 25_000_000 and s.resources.swap == 500_000


@pytest.mark.parametrize("spelling", ["c=1, m=1024", "cpu=1, mem=1024", "Cpus=1, RAM=1024", "CPUS=1, memory=1024",
                                      "C=1, r=1024", "cpus=1, M=1024"])
def test_resource_name_aliases(spelling: str) -> None:
    lay = layout(f"SLOT_TYPE_1 = {spelling}\nNUM_SLOTS_TYPE_1 = 1")
    assert (lay.slots[0].resources.cpus, lay.slots[0].resources.memory) == (1, 1024)


@pytest.mark.parametrize("spelling", ["s=1/2", "swap=50%", "v=1/2", "VirtualMemory=50%", "virt=1/2"])
def test_swap_aliases(spelling: str) -> None:
    lay = layout(f"SLOT_TYPE_1 = {spelling}\nNUM_SLOTS_TYPE_1 = 1")
    assert lay.slots[0].resources.swap == 1_000_000


def test_blanket_default_applies_to_resources_not_named() -> None:
    lay = layout("SLOT_TYPE_1 = cpus=1, disk=auto, 50%\nNUM_SLOTS_TYPE_1 = 1")
    r = lay.slots[0].resources
    assert r.cpus == 1 and r.memory == 8192 and r.swap == 1_000_000
    assert r.disk == 100_000_000  # auto: the only slot gets all of it


def test_auto_shares_split_what_explicit_shares_leave() -> None:
    lay = layout("SLOT_TYPE_1 = cpus=2, memory=10%\nNUM_SLOTS_TYPE_1 = 1\n"
                 "SLOT_TYPE_2 = auto\nNUM_SLOTS_TYPE_2 = 3")
    big, *rest = lay.slots
    assert big.resources.cpus == 2 and big.resources.memory == 1638
    for s in rest:
        assert s.type_id == 2 and s.resources.cpus == 2
        assert s.resources.memory == (16384 - 1638) // 3


def test_slot_types_are_numbered_in_type_order() -> None:
    lay = layout("SLOT_TYPE_2 = 1/4\nNUM_SLOTS_TYPE_2 = 2\nSLOT_TYPE_1 = 1/4\nNUM_SLOTS_TYPE_1 = 1\n")
    assert [(s.name, s.type_id) for s in lay.slots] == [("slot1", 1), ("slot2", 2), ("slot3", 2)]


def test_partitionable_slot_type() -> None:
    lay = layout("SLOT_TYPE_1 = 50%\nSLOT_TYPE_1_PARTITIONABLE = TRUE\nNUM_SLOTS_TYPE_1 = 1\n"
                 "SLOT_TYPE_2 = 25%\nNUM_SLOTS_TYPE_2 = 2")
    assert [s.kind for s in lay.slots] == ["Partitionable", "Static", "Static"]
    assert lay.slots[0].resources.cpus == 4


def test_feature_templates() -> None:
    assert [s.kind for s in layout("use FEATURE : StaticSlots").slots] == ["Static"] * 8
    assert [s.kind for s in layout("use FEATURE : PartitionableSlot").slots] == ["Partitionable"]


def test_num_cpus_and_memory_override_detection() -> None:
    lay = layout("NUM_CPUS = 4\nMEMORY = 2048")
    assert lay.totals.cpus == 4 and lay.totals.memory == 2048
    assert lay.detected.cpus == 8 and lay.detected.memory == 16384
    assert lay.slots[0].resources.cpus == 4


def test_num_cpus_may_refer_to_the_detected_cores_of_the_host() -> None:
    lay = layout("NUM_CPUS = $(DETECTED_CORES) * 2", cpus=3)
    assert lay.totals.cpus == 6


def test_reserved_memory_and_disk() -> None:
    lay = layout("RESERVED_MEMORY = 1024\nRESERVED_DISK = 1000")
    assert lay.totals.memory == 16384 - 1024
    assert lay.totals.disk == 100_000_000 - 1000 * 1024


def test_disk_knob_replaces_measured_disk() -> None:
    assert layout("DISK = 5000000").totals.disk == 5_000_000


def test_overcommit_names_the_resource_and_the_knob() -> None:
    with pytest.raises(ConfigError) as err:
        layout("SLOT_TYPE_1 = cpus=1, memory=60%\nNUM_SLOTS_TYPE_1 = 2\n")
    assert "memory" in str(err.value) and "SLOT_TYPE_1" in str(err.value)
    assert err.value.line == 1


def test_overcommit_of_disk_fractions() -> None:
    with pytest.raises(ConfigError, match="over-committed on disk"):
        layout("SLOT_TYPE_1 = disk=3/4\nNUM_SLOTS_TYPE_1 = 2\n")


def test_absolute_disk_is_a_size_in_kilobytes() -> None:
    # CpuAttributes::buildSlotRequest (PROVISION_FRACTIONAL_DISK is off in HTCondor 25): disk=N is N KB, with
    # an optional K/M/G/T suffix, at least 1 MB
    lay = layout("SLOT_TYPE_1 = cpus=1, disk=2000\nNUM_SLOTS_TYPE_1 = 1\n"
                 "SLOT_TYPE_2 = cpus=1, disk=2G\nNUM_SLOTS_TYPE_2 = 1\n"
                 "SLOT_TYPE_3 = cpus=1, disk=10\nNUM_SLOTS_TYPE_3 = 1\n")
    assert [s.resources.disk for s in lay.slots] == [2000, 2 * 1024 * 1024, 1024]


def test_auto_disk_shares_round_down_to_whole_kilobytes() -> None:
    # AvailAttributes::computeAutoShares divides whole KB (PROVISION_FRACTIONAL_DISK is off, ResAttributes.h):
    # three slots on 10,000,000 KB get 3,333,333 each, the last kilobyte is nobody's; swap likewise
    lay = layout("NUM_SLOTS = 3\nSLOT_TYPE_0_PARTITIONABLE = False", cpus=3, disk=10_000_000, swap=1_000_000)
    assert [s.resources.disk for s in lay.slots] == [3_333_333] * 3
    assert [s.resources.swap for s in lay.slots] == [333_333] * 3
    assert lay.totals.disk == 10_000_000  # an auto share provisions the whole free disk


def test_a_disk_percentage_is_truncated_to_whole_kilobytes() -> None:
    # CpuAttributes::buildSlotRequest: compute_local_resource(free_disk, share) casts -share * free_disk
    lay = layout("SLOT_TYPE_1 = cpus=1, disk=1/3\nNUM_SLOTS_TYPE_1 = 3", cpus=3, disk=10_000_000)
    assert [s.resources.disk for s in lay.slots] == [3_333_333] * 3


def test_total_disk_is_the_provisioned_disk_without_an_auto_share() -> None:
    # AvailAttributes::update_provisioned_disk: with no auto disk share the partition's provisioned disk is
    # what the slots' shares took; MachAttributes::publish_static publishes that as TotalDisk
    lay = layout("SLOT_TYPE_1 = cpus=1, disk=50%\nNUM_SLOTS_TYPE_1 = 1", disk=10_000_000)
    assert lay.slots[0].resources.disk == 5_000_000 and lay.totals.disk == 5_000_000
    lay = layout("SLOT_TYPE_1 = cpus=1, disk=25%\nNUM_SLOTS_TYPE_1 = 2\n"
                 "SLOT_TYPE_2 = cpus=1, disk=auto\nNUM_SLOTS_TYPE_2 = 1", disk=10_000_000)
    assert [s.resources.disk for s in lay.slots] == [2_500_000, 2_500_000, 5_000_000]
    assert lay.totals.disk == 10_000_000


def test_a_slot_type_without_commas_is_split_on_white_space() -> None:
    lay = layout("MACHINE_RESOURCE_SQUIDs = 4\nSLOT_TYPE_1 = SQUIDs=2 cpus=2\nNUM_SLOTS_TYPE_1 = 1\n")
    assert (lay.slots[0].resources.cpus, lay.slots[0].resources.custom["SQUIDs"]) == (2, 2)


def test_unknown_resource_with_an_amount_is_an_error_but_zero_is_not() -> None:
    with pytest.raises(ConfigError, match="unknown resource"):
        layout("SLOT_TYPE_1 = bogus=2\nNUM_SLOTS_TYPE_1 = 1\n")
    assert len(layout("SLOT_TYPE_1 = GPUs=0, 50%\nNUM_SLOTS_TYPE_1 = 1\n").slots) == 1


def test_slot_type_zero_is_reserved() -> None:
    with pytest.raises(ConfigError, match="reserved"):
        layout("NUM_SLOTS_TYPE_0 = 1")


def test_custom_resources_count_and_ids() -> None:
    lay = layout("MACHINE_RESOURCE_Cogs = 16\nMACHINE_RESOURCE_GPUs = CUDA0, CUDA1, CUDA2\n")
    assert lay.custom["Cogs"].count == 16 and lay.custom["GPUs"].ids == ("CUDA0", "CUDA1", "CUDA2")
    assert lay.totals.custom == {"Cogs": 16, "GPUs": 3}
    assert lay.slots[0].resources.custom == {"Cogs": 16, "GPUs": 3}
    assert lay.slots[0].custom_ids == {"GPUs": ("CUDA0", "CUDA1", "CUDA2")}


def test_machine_resource_names_selects_the_resources() -> None:
    lay = layout("MACHINE_RESOURCE_NAMES = Cogs\nMACHINE_RESOURCE_Cogs = 4\nMACHINE_RESOURCE_Actuator = 2\n")
    assert list(lay.custom) == ["Cogs"]


def test_offline_ids_are_not_counted() -> None:
    lay = layout("MACHINE_RESOURCE_GPUs = CUDA0, CUDA1\nOFFLINE_MACHINE_RESOURCE_GPUs = CUDA1\n")
    assert lay.totals.custom["GPUs"] == 1 and lay.custom["GPUs"].detected == 2


def test_manual_example_of_custom_resources_in_slot_types() -> None:
    lay = layout("MACHINE_RESOURCE_Cogs = 16\nMACHINE_RESOURCE_actuator = 8\n"
                 "SLOT_TYPE_1 = cogs=50%,actuator=6,50%\nSLOT_TYPE_1_PARTITIONABLE = TRUE\nNUM_SLOTS_TYPE_1 = 1\n"
                 "SLOT_TYPE_2 = cogs=25%,actuator=1,25%\nSLOT_TYPE_2_PARTITIONABLE = FALSE\nNUM_SLOTS_TYPE_2 = 2\n")
    p, s2, s3 = lay.slots
    assert p.resources.custom == {"Cogs": 8, "actuator": 6} and p.resources.cpus == 4
    assert s2.resources.custom == {"Cogs": 4, "actuator": 1} and s3.resources.cpus == 2


def test_auto_custom_resources_give_the_extra_units_to_the_first_slots() -> None:
    lay = layout("MACHINE_RESOURCE_GPUs = CUDA0, CUDA1, CUDA2\nNUM_SLOTS = 2")
    assert [s.resources.custom["GPUs"] for s in lay.slots] == [2, 1]
    assert [s.custom_ids["GPUs"] for s in lay.slots] == [("CUDA0", "CUDA1"), ("CUDA2",)]


def test_gpu_constraint_by_id_picks_that_gpu() -> None:
    lay = layout('MACHINE_RESOURCE_GPUs = GPU-a, GPU-b\n'
                 'SLOT_TYPE_1 @=slot\n  GPUs = 1 : "GPU-b"\n  CPUs = 1\n  Memory = 10\n@slot\n'
                 'NUM_SLOTS_TYPE_1 = 1\n')
    assert lay.slots[0].custom_ids == {"GPUs": ("GPU-b",)}
    assert lay.slots[0].resources.memory == 10


def test_name_prefix() -> None:
    assert layout("STARTD_RESOURCE_PREFIX = vm\nNUM_SLOTS = 2").slots[1].name == "vm2"


def test_consumption_policy_is_per_partitionable_slot_type() -> None:
    lay = layout("SLOT_TYPE_1 = cpus=4\nSLOT_TYPE_1_PARTITIONABLE = True\nNUM_SLOTS_TYPE_1 = 1\n"
                 "SLOT_TYPE_1_CONSUMPTION_POLICY = True\n")
    assert lay.slots[0].consumption_policy
    # type 0 is a slot type like any other: its partitionable slots take the global CONSUMPTION_POLICY
    assert layout("CONSUMPTION_POLICY = True\nNUM_SLOTS = 2").slots[0].consumption_policy
    assert not layout("CONSUMPTION_POLICY = True\nNUM_SLOTS = 2\nSLOT_TYPE_0_PARTITIONABLE = False"
                      ).slots[0].consumption_policy


def test_layout_lookup_by_name() -> None:
    lay = layout("NUM_SLOTS = 2")
    assert lay.slot("slot2@host").id == 2
    with pytest.raises(KeyError):
        lay.slot("slot3")


def test_host_sample_without_values_uses_configured_detection() -> None:
    conf = config.load(text="DETECTED_CPUS = 3\nDETECTED_MEMORY = 3000\n", validate=False)
    from startd.engine.events import HostSample

    lay = slots.build_layout(conf, HostSample(now=0))
    assert lay.detected.cpus == 3 and lay.detected.memory == 3000
    assert host().cpus == 8


def test_minimal_share_allows_fractional_cpus() -> None:
    lay = layout("SLOT_TYPE_1 = cpus=min, 50%\nNUM_SLOTS_TYPE_1 = 1", cpus=8)
    s = lay.slots[0]
    assert s.allow_fractional_cpus and s.resources.cpus == 8 / 128
    assert s.resources.memory == 8192
