"""The resource and identity attributes of slot ads, and the configuration's own attributes."""

from __future__ import annotations

from slotkit import conf, host, layout

from startd import slots
from startd.classad import ClassAd, parse_ad, parse_expr


def test_static_slot_identity_and_resources() -> None:
    lay = layout("NUM_SLOTS = 2\nSLOT_TYPE_0_PARTITIONABLE = False")
    a = slots.resource_attrs(lay.slots[1], lay, machine_name="node.example")
    assert a["Name"] == "slot2@node.example" and a["Machine"] == "node.example"
    assert (a["MyType"], a["TargetType"]) == ("Machine", "Job")
    assert (a["SlotID"], a["SlotTypeID"], a["SlotType"]) == (2, 0, "Static")
    assert "PartitionableSlot" not in a and "DynamicSlot" not in a
    # Resource::publish_requirements: a static slot publishes WithinResourceLimits too
    assert "WithinResourceLimits" in a
    assert (a["Cpus"], a["Memory"], a["Disk"], a["VirtualMemory"]) == (4, 8192, 50_000_000, 1_000_000)
    assert (a["TotalSlotCpus"], a["TotalSlotMemory"], a["TotalSlotDisk"]) == (4, 8192, 50_000_000.0)
    assert (a["TotalCpus"], a["TotalMemory"], a["TotalDisk"], a["TotalVirtualMemory"]) == (8, 16384, 100_000_000,
                                                                                           2_000_000)
    assert (a["DetectedCpus"], a["DetectedMemory"]) == (8, 16384)
    assert a["MachineResources"] == "Cpus Memory Disk Swap"


def test_partitionable_slot_publishes_what_is_left_and_its_children() -> None:
    lay = layout()
    p = lay.slots[0]
    got = slots.Resources(cpus=2, memory=1024, disk=2048, swap=p.resources.swap)
    d = slots.dynamic_slot(p, 1, got)
    da = slots.resource_attrs(d, lay, got, machine_name="m")
    pa = slots.resource_attrs(p, lay, slots.take(p.resources, got), machine_name="m", children=[da])
    assert (pa["SlotType"], pa["PartitionableSlot"], pa["Cpus"], pa["Memory"]) == ("Partitionable", True, 6, 15360)
    assert pa["TotalSlotCpus"] == 8 and pa["NumDynamicSlots"] == 1
    assert pa["ChildName"].evaluate() == ["slot1_1@m"]
    assert pa["ChildCpus"].evaluate() == [2]
    assert isinstance(pa["WithinResourceLimits"], type(parse_expr("1")))
    wrl = pa["WithinResourceLimits"]
    my = ClassAd({"Cpus": 6, "Memory": 15360, "Disk": 10})
    assert wrl.evaluate(my, parse_ad("[RequestCpus = 6; RequestMemory = 1; RequestDisk = 10]")) is True
    assert wrl.evaluate(my, parse_ad("[RequestCpus = 7; RequestMemory = 1; RequestDisk = 10]")) is False


def test_dynamic_slot_identity() -> None:
    lay = layout()
    d = slots.dynamic_slot(lay.slots[0], 3, slots.Resources(cpus=1, memory=128, disk=2048))
    a = slots.resource_attrs(d, lay, machine_name="m")
    assert a["Name"] == "slot1_3@m"
    # Resource::publish_static: SlotTypeID is the partitionable slot's (0 here), never negative since 23.0
    assert (a["SlotID"], a["SlotTypeID"], a["SlotType"], a["DynamicSlot"]) == (1, 0, "Dynamic", True)
    assert (a["ParentSlotId"], a["DSlotId"]) == (1, 3)
    assert (a["Cpus"], a["TotalSlotCpus"], a["Memory"]) == (1, 1, 128)


def test_custom_resource_attributes() -> None:
    lay = layout("MACHINE_RESOURCE_GPUs = CUDA0, CUDA1\nMACHINE_RESOURCE_Cogs = 16\nNUM_SLOTS = 2")
    a = slots.resource_attrs(lay.slots[0], lay, machine_name="m")
    assert (a["TotalGPUs"], a["DetectedGPUs"], a["GPUs"], a["TotalSlotGPUs"]) == (2, 2, 1, 1)
    assert a["AssignedGPUs"] == "CUDA0"
    assert (a["TotalCogs"], a["Cogs"], a["TotalSlotCogs"]) == (16, 8, 8)
    assert "AssignedCogs" not in a
    assert a["MachineResources"] == "Cpus Memory Disk Swap GPUs Cogs"


def test_dynamic_slot_assigned_ids() -> None:
    lay = layout("MACHINE_RESOURCE_GPUs = CUDA0, CUDA1")
    p = lay.slots[0]
    got = slots.Resources(cpus=1, memory=1, disk=1, custom={"GPUs": 1})
    d = slots.dynamic_slot(p, 1, got, slots.take_ids(p, [], got))
    assert slots.resource_attrs(d, lay, got, machine_name="m")["AssignedGPUs"] == "CUDA0"
    assert slots.resource_attrs(p, lay, slots.take(p.resources, got), machine_name="m")["GPUs"] == 1


def test_consumption_policy_attributes() -> None:
    c = conf("SLOT_TYPE_1 = 100%\nSLOT_TYPE_1_PARTITIONABLE = True\nNUM_SLOTS_TYPE_1 = 1\nCONSUMPTION_POLICY = True")
    lay = slots.build_layout(c, host())
    a = slots.resource_attrs(lay.slots[0], lay, machine_name="m", conf=c)
    assert str(a["ConsumptionCpus"]).replace(" ", "").lower() == "quantize(target.requestcpus,{1})"
    assert "ConsumptionMemory" in a and "ConsumptionDisk" in a and "ConsumptionSwap" not in a


def test_startd_attrs_with_per_slot_lists_and_overrides() -> None:
    c = conf('favorite_color = "blue"\nfavorite_season = "spring"\nfavorite_movie = "Up"\n'
             "STARTD_ATTRS = favorite_color, favorite_season\nSLOT1_STARTD_ATTRS = favorite_movie\n"
             'SLOT2_favorite_color = "green"\nSLOT3_favorite_season = "summer"\n')
    s1, s2, s3 = (slots.config_attrs(c, n) for n in (1, 2, 3))
    assert {k: v.evaluate() for k, v in s1.items() if k.startswith("favorite")} == {
        "favorite_color": "blue", "favorite_season": "spring", "favorite_movie": "Up"}
    assert s2["favorite_color"].evaluate() == "green" and "favorite_movie" not in s2
    assert s3["favorite_season"].evaluate() == "summer"


def test_startd_exprs_is_the_old_name() -> None:
    c = conf("IsDesktop = True\nSTARTD_EXPRS = IsDesktop")
    assert slots.config_attrs(c, 1)["IsDesktop"].evaluate() is True


def test_startd_attrs_keep_expressions() -> None:
    c = conf("GenomeDBSizeGB = 1729\nHasLargeGenomeDB = GenomeDBSizeGB > 100\n"
             "STARTD_ATTRS = GenomeDBSizeGB HasLargeGenomeDB")
    a = slots.config_attrs(c, 1)
    assert str(a["HasLargeGenomeDB"]).replace(" ", "") == "GenomeDBSizeGB>100"


def test_dynamic_slots_use_their_parents_slot_overrides() -> None:
    lay = layout()
    c = conf('Color = "blue"\nSLOT1_Color = "red"\nSTARTD_ATTRS = Color')
    d = slots.dynamic_slot(lay.slots[0], 1, slots.Resources(cpus=1))
    assert slots.config_attrs(c, d)["Color"].evaluate() == "red"


def test_cross_slot_attrs() -> None:
    c = conf("STARTD_SLOT_ATTRS = State")
    ads = {"slot1": parse_ad('[State = "Claimed"]'), "slot2": parse_ad('[State = "Unclaimed"]')}
    out = slots.cross_slot_attrs(c, ads)
    for name in ads:
        assert {k: v.evaluate() for k, v in out[name].items()} == {"slot1_State": "Claimed",
                                                                   "slot2_State": "Unclaimed"}
    assert slots.cross_slot_attrs(conf(""), ads) == {"slot1": {}, "slot2": {}}
