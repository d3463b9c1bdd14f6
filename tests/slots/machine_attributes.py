"""Machine (slot) ClassAd attributes of HTCondor 25, classified for the startd emulator.

Pure data, no tests.  ``ATTRIBUTES`` has one entry per ``:classad-attribute-def:`` of the
reference, in the reference's order and spelling (243 entries, templated names keep their
``<name>`` spelling):

    reference: docs/classad-attributes/machine-classad-attributes.rst of the HTCondor source at
               commit 7491a145f64a1c2393ed0933375874344fa44f9f (HTCondor 25.14).

Each entry was decided by reading the reference text and the C++ at that commit.  The slot ad a
startd sends (and answers direct queries with) is built by Resource::publish_single_slot_ad
(src/condor_startd.V6/Resource.cpp) from:

    Resource::publish_static        MyType/TargetType/Name/StartdIpAddr, Rank, CpuBusy, SlotWeight,
                                    Unhibernate, DaemonCore::publish (config_fill_ad: STARTD_ATTRS,
                                    SYSTEM_STARTD_ATTRS, CondorVersion, CondorPlatform; MyCurrentTime,
                                    Machine, MyAddress, AddressV1), ResMgr::publish_static_slot_resources
                                    -> CpuAttributes::publish_static (Cpus, Memory, TotalSlot*,
                                    VirtualMemory, <res>, TotalSlot<res>, Assigned<res>, BrokenSlot*,
                                    SlotBroken*), MachAttributes::publish_static (Arch, OpSys*, Total*,
                                    Detected<res>, MachineResources, has_<flag>, Cpu*, Microarch,
                                    HasUserNamespaces, HasRotationalScratch), ResMgr::publish_static
                                    -> Starter::publish (the `condor_starter -classad` ad), SlotID,
                                    SlotTypeID, SlotType, PartitionableSlot/DynamicSlot, MaxClaimTime
    Resource::publish_dynamic       MyCurrentTime, CpuAttributes::publish_dynamic (Disk, LoadAvg,
                                    CondorLoadAvg, KeyboardIdle, ConsoleIdle),
                                    MachAttributes::publish_common_dynamic (TotalLoadAvg, Clock*,
                                    Offline<res>, KFlops/Mips never: see below), publish_slot_dynamic
                                    (Available<res>), ResMgr::publish_resmgr_dynamic (TotalSlots,
                                    VMUniverseMgr::publish, StartdStats, TimeToLive,
                                    HibernationManager::publish), ResMgr::publish_draining_attrs,
                                    Resource::publish_evaluated (latches), ResState::publish (State,
                                    Activity, Entered*, ResState::publishHistoryInfo TotalTime*),
                                    Resource::publish_requirements (Start, Requirements,
                                    WithinResourceLimits), RetirementTimeRemaining,
                                    MachineMaxVacateTime, Claim::publish / publishStateTimes /
                                    publishPreemptingClaim, PublicClaimId, ClaimEndTime,
                                    ResMgr::adlist_publish (startd cron and benchmark ads),
                                    DaemonCore::Stats::Publish (dc_stats), SelfMonitorData::ExportData,
                                    AcceptedWhileDraining, MaxJobRetirementTime,
                                    Resource::publishDynamicChildSummaries (Child*, NumDynamicSlots)
    Resource::process_update_ad     Uptime*/StartOfJob* metrics -> Device<res>AverageUsage/PeakUsage
    publish_single_slot_ad          LastHeardFrom and DaemonStartTime for direct queries

ResMgr::publish_daemon_ad (ResMgr.cpp) builds the separate StartD daemon ad; attributes found only
there are DAEMON_AD_ONLY.  StartdStats (ResMgr.h) adds JobBusyTime/JobDuration with
IF_VERBOSEPUB, which StatisticsPool::Publish (src/condor_utils/generic_stats.cpp) skips unless
STATISTICS_TO_PUBLISH_LIST whitelists them (StatisticsPool::SetVerbosities).

Fields of ``Attr``:
    name          spelled as in the reference (ClassAd names are case-insensitive)
    scope         "published" or "out"
    why_or_check  published: what HTCondor publishes (type and meaning, and the C++ function);
                  out: exactly one of the reason constants below
    when          published: one of WHENS; out: None
    note          free text (the "free-text addition" for an out reason, caveats for published)

``EXTRA_PUBLISHED`` lists attributes a real HTCondor 25 slot ad carries that the reference does not
list, each verified in the publish functions named above.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- scopes -------------------------------------------------------------------------------------
PUBLISHED = "published"
OUT = "out"

# --- reasons an attribute is out of scope --------------------------------------------------------
WINDOWS = "windows"                  # published only by a Windows startd
VM_UNIVERSE = "vm_universe"          # VM universe (VMUniverseMgr, vm-gahp)
CONTAINERS = "containers"            # Docker, Singularity/Apptainer, SIF, sandbox images
CLOUD = "cloud"                      # use feature:CommonCloudAttributes* startd cron
GPU_PROPERTIES = "gpu_properties"    # GPU device properties and GPU usage monitoring
LVM = "lvm"                          # STARTD_ENFORCE_DISK_LIMITS / VolumeManager
COLLECTOR_ADDED = "collector_added"  # the collector (or negotiator) adds it, not the startd
DAEMON_AD_ONLY = "daemon_ad_only"    # only in the StartD daemon ad (ResMgr::publish_daemon_ad)
OBSOLETE = "obsolete"                # HTCondor 25 C++ does not publish it (under this name)

REASONS = (WINDOWS, VM_UNIVERSE, CONTAINERS, CLOUD, GPU_PROPERTIES, LVM, COLLECTOR_ADDED,
           DAEMON_AD_ONLY, OBSOLETE)

# --- situations in which a published attribute must appear ---------------------------------------
WHENS = (
    "always",               # every slot ad of a default Linux EP
    "claimed",              # the slot is Claimed
    "busy",                 # a job is running (starter active)
    "preempting",           # a better claim is waiting / the slot is being preempted
    "draining",             # the startd is (or was) draining
    "pslot",                # every partitionable slot ad
    "dslot",                # every dynamic slot ad
    "pslot_with_children",  # a partitionable slot that has dynamic children
    "custom_resource",      # a MACHINE_RESOURCE_<name> is configured
    "after_job",            # after a job ran and exited
    "configured",           # only when a knob sets it
    "condition",            # only under some host / runtime condition
    "never_default",        # publication itself needs a knob (e.g. STATISTICS_TO_PUBLISH_LIST)
)


@dataclass(frozen=True)
class Attr:
    name: str
    scope: str
    why_or_check: str
    when: str | None = None
    note: str = ""


def _p(name: str, check: str, when: str, note: str = "") -> Attr:
    return Attr(name, PUBLISHED, check, when, note)


def _o(name: str, reason: str, note: str = "") -> Attr:
    return Attr(name, OUT, reason, None, note)


_BF = ("HAVE_BOINC is OFF in build/cmake/CondorConfigure.cmake, so ResMgr::backfillMgrConfig "
       "(verifyBackfillSystem) never creates a backfill manager, no slot ever enters the Backfill "
       "state, and ResState::publishHistoryInfo only publishes non-zero totals")
_TT = "ResState::publishHistoryInfo; only when the accumulated total is > 0"
_STAT = ("StartdStats probe (ResMgr.h) added with IF_VERBOSEPUB|IF_NONZERO; StatisticsPool::Publish "
         "(generic_stats.cpp) skips it unless STATISTICS_TO_PUBLISH_LIST names it "
         "(StatisticsPool::SetVerbosities)")
_STARTER = "from `condor_starter -classad` (starter_v61_main.cpp printClassAd) via Starter::publish"
_CHILD = ("Resource::publishDynamicChildSummaries: ClassAd list, one element per dynamic child "
          "('{}' with no children); only if ADVERTISE_PSLOT_ROLLUP_INFORMATION (default true)")
_GPU = "GPU device property from condor_gpu_discovery via the GPUs machine resource inventory"


ATTRIBUTES: tuple[Attr, ...] = (
    _p("AcceptedWhileDraining",
       "bool: slot accepted its current claim while draining (Resource::publish_dynamic, "
       "r_acceptedWhileDraining; False otherwise)", "always"),
    _p("Activity",
       "string: Idle/Busy/Suspended/Vacating/Killing/Benchmarking/Retiring/Cleaning "
       "(ResState::publish)", "always"),
    _p("Arch", "string: e.g. \"X86_64\" (MachAttributes::publish_static)", "always"),
    _o("AvgTransferInputMB", DAEMON_AD_ONLY,
       "ResMgr::publish_daemon_ad assigns it from startd_stats.bytes_recvd; the StartdStats pool "
       "deliberately does not add BytesSent/BytesRecvd to slot ads"),
    _o("AvgTransferOutputMB", DAEMON_AD_ONLY,
       "ResMgr::publish_daemon_ad (startd_stats.bytes_sent)"),
    _o("BrokenContextAds", DAEMON_AD_ONLY,
       "ResMgr::publish_daemon_ad, list of <tag>BrokenContext nested ads"),
    _p("Microarch",
       "string: x86_64 microarchitecture level \"x86_64-v1\"..\"x86_64-v4\" from /proc/cpuinfo "
       "flags (sysapi_processor_flags, MachAttributes::publish_static)", "condition",
       "x86_64 Linux only; empty (not published) on other architectures"),
    _p("CanHibernate",
       "bool: HibernationManager::canHibernate() (HibernationManager::publish from "
       "ResMgr::publish_resmgr_dynamic; HAVE_HIBERNATION is ON on Linux); False when hibernation "
       "is unsupported/off", "always"),
    _p("CgroupEnforced",
       "bool True: the starter put the job in a cgroup (os_proc.cpp sets it in the starter update "
       "ad; Claim::loadStatistics -> Claim::publish)", "condition",
       "only while a job runs under a cgroup (root starter with usable cgroups)"),
    _p("ClaimEndTime",
       "int epoch: end of the claim lease, r_cur->getLeaseEndtime() (Resource::publish_dynamic when "
       "State is Claimed)", "claimed",
       "reference says pslots only, but C++ publishes it in every Claimed slot; value is 0 unless "
       "a claimable p-slot claim set it (command.cpp setLeaseEndtime)"),
    _o("CleanupCategoryCounts", DAEMON_AD_ONLY,
       "ResMgr::publish_daemon_ad, only when cleanup reminders exist"),
    _p("ClockDay", "int: day of week 0=Sunday (MachAttributes::publish_common_dynamic)", "always"),
    _p("ClockMin", "int: minutes since midnight (MachAttributes::publish_common_dynamic)", "always"),
    _p("CondorLoadAvg",
       "float (2 decimals): load from HTCondor jobs/benchmarks in this slot "
       "(CpuAttributes::publish_dynamic)", "always"),
    _p("CondorVersion",
       "string: \"$CondorVersion: 25.x.y <date> BuildID: ... $\" (config_fill_ad via "
       "DaemonCore::publish; the starter's copy is ignored by Starter::publish)", "always"),
    _p("ConsoleIdle",
       "int seconds: console idle for slots <= SLOTS_CONNECTED_TO_CONSOLE, else startd lifetime + "
       "DISCONNECTED_KEYBOARD_IDLE_BOOST (ResMgr::assign_idle_to_slots, "
       "CpuAttributes::publish_dynamic)", "always",
       "CpuAttributes::publish_dynamic skips it only when the value is -1, which assign_idle_to_slots "
       "never leaves"),
    _p("Cpus",
       "int (float if fractional cpus allowed): cpus in the slot, remaining cpus for a p-slot, 0 "
       "when broken (CpuAttributes::publish_static)", "always"),
    _p("CpuFamily", "int: /proc/cpuinfo \"cpu family\" (MachAttributes::publish_static)", "condition",
       "only when sysapi found a family > 0 (x86 Linux)"),
    _p("CpuModelNumber", "int: /proc/cpuinfo \"model\" (MachAttributes::publish_static)", "condition",
       "only when > 0 (x86 Linux)"),
    _p("CpuCacheSize", "int KiB: /proc/cpuinfo \"cache size\" (MachAttributes::publish_static)",
       "condition", "only when > 0"),
    _p("CurrentRank",
       "float: Rank of the current claim's job, 0.0 when unclaimed (Claim::publish; every slot "
       "always has an r_cur Claim object)", "always"),
    _p("DetectedCpus",
       "int: param DETECTED_CORES (SelfMonitorData::ExportData)", "always"),
    _p("DetectedDisk",
       "int KiB: size of the slot's execute volume, or DISK if configured "
       "(MachAttributes::publish_static with the slot's CpuAttributes)", "always"),
    _p("DetectedMemory", "int MiB: param DETECTED_MEMORY (SelfMonitorData::ExportData)", "always"),
    _p("Disk",
       "int KiB: disk available to the slot, remaining disk for a p-slot "
       "(CpuAttributes::publish_dynamic)", "always"),
    _p("Draining",
       "bool True while the slot is draining, deleted otherwise (ResMgr::publish_draining_attrs)",
       "draining"),
    _p("DrainingRequestId",
       "string: id of the drain request (draining_id), deleted when not draining "
       "(ResMgr::publish_draining_attrs)", "draining"),
    _o("DotNetVersions", WINDOWS, "MachAttributes::publish_static under #if defined(WIN32)"),
    _p("DynamicSlot", "bool True in dynamic slots (Resource::publish_static)", "dslot"),
    _p("EnteredCurrentActivity", "int epoch: when the Activity last changed (ResState::publish)",
       "always"),
    _p("ExpectedMachineGracefulDrainingBadput",
       "int cpu-seconds (ResMgr::compute_draining_attrs, ResMgr::publish_draining_attrs)", "always"),
    _p("ExpectedMachineGracefulDrainingCompletion",
       "int epoch (ResMgr::compute_draining_attrs, ResMgr::publish_draining_attrs)", "always"),
    _p("ExpectedMachineQuickDrainingBadput",
       "int cpu-seconds (ResMgr::compute_draining_attrs, ResMgr::publish_draining_attrs)", "always"),
    _p("ExpectedMachineQuickDrainingCompletion",
       "int epoch (ResMgr::compute_draining_attrs, ResMgr::publish_draining_attrs)", "always"),
    _p("FileSystemDomain", "string: FILESYSTEM_DOMAIN (MachAttributes::publish_static)", "always"),
    _o("HasContainer", CONTAINERS, "starter -classad, only when Docker or Singularity works"),
    _o("HasDocker", CONTAINERS, "starter -classad when DockerProc::Detect()"),
    _o("DockerCachedImageSizeMb", CONTAINERS,
       "MachAttributes::publish_common_dynamic only when DockerAPI::imageCacheUsed() >= 0"),
    _o("DockerOfflineReason", CONTAINERS),
    _o("HasSandboxImage", CONTAINERS),
    _o("HasSIF", CONTAINERS),
    _o("HasEncryptExecuteDirectory", LVM,
       "on Linux the starter only prints it when VolumeManager::DetectLVM() "
       "(STARTD_ENFORCE_DISK_LIMITS) and cryptsetup exists; always True on Windows"),
    _p("HasFileTransfer", "bool True: " + _STARTER, "always"),
    _p("HasFileTransferPluginMethods",
       "string: comma list of URL methods the starter's plugins support "
       "(FileTransfer::GetSupportedMethods) " + _STARTER, "always",
       "absent only if no transfer plugin is installed"),
    _p("HasRotationalScratch",
       "bool: execute dir is on a rotational disk (MachAttributes::publish_static, Linux)",
       "condition", "undefined when rotationality cannot be determined"),
    _p("HasUserNamespaces",
       "bool True: unprivileged user namespaces work (hasUnprivUserNamespace, "
       "MachAttributes::publish_static)", "condition", "never published as False"),
    _p("Has_sse4_1", "bool True: cpu flag sse4_1 (published as has_sse4_1, "
       "MachAttributes::publish_static)", "condition"),
    _p("Has_sse4_2", "bool True: cpu flag sse4_2 (published as has_sse4_2)", "condition"),
    _p("has_ssse3", "bool True: cpu flag ssse3", "condition"),
    _p("has_avx", "bool True: cpu flag avx", "condition"),
    _p("has_avx2", "bool True: cpu flag avx2", "condition"),
    _p("has_avx512f", "bool True: cpu flag avx512f", "condition"),
    _p("has_avx512dq", "bool True: cpu flag avx512dq", "condition"),
    _o("has_avx512dnni", OBSOLETE,
       "no such flag: sysapi_processor_flags (condor_sysapi/processor_flags.cpp) looks for "
       "avx512_vnni, so the C++ publishes has_avx512_vnni (see EXTRA_PUBLISHED)"),
    _p("HasSelfCheckpointTransfers", "bool True: " + _STARTER, "always"),
    _o("HasSingularity", CONTAINERS),
    _p("HasSshd",
       "bool: SSH_TO_JOB_SSHD (default /usr/sbin/sshd) is executable; printed True or False "
       "on non-Windows " + _STARTER, "always"),
    _p("HasVM",
       "bool: False unless VM universe is configured and working (VMUniverseMgr::publish from "
       "ResMgr::publish_resmgr_dynamic overrides the starter's HasVM)", "always"),
    _p("IsDataSlot",
       "bool True: dynamic slot built by command_data_slot for AP common files "
       "(Resource::publish_static)", "condition", "only data d-slots"),
    _o("IsEnforcingDiskUsage", LVM, "VolumeManager::AdvertiseInfo (starter ad) when LVM is set up"),
    _p("IsWakeAble",
       "bool: primary network adapter supports and enables Wake-on-LAN "
       "(NetworkAdapterBase::publish via HibernationManager::publish)", "always",
       "absent if the startd found no usable network adapter"),
    _o("IsWakeEnabled", OBSOLETE,
       "C++ never uses this name: ATTR_IS_WAKE_ENABLED is \"IsWakeOnLanEnabled\" "
       "(NetworkAdapterBase::publish), see EXTRA_PUBLISHED"),
    _p("JobBusyTimeAvg", "float seconds: mean starter lifetime; " + _STAT, "never_default"),
    _p("JobBusyTimeCount", "int: starters that exited; " + _STAT, "never_default"),
    _p("JobBusyTimeMax", "float seconds; " + _STAT, "never_default"),
    _p("JobBusyTimeMin", "float seconds; " + _STAT, "never_default"),
    _p("RecentJobBusyTimeAvg", "float seconds, last 20 min; " + _STAT, "never_default"),
    _p("RecentJobBusyTimeCount", "int, last 20 min; " + _STAT, "never_default"),
    _p("RecentJobBusyTimeMax", "float seconds, last 20 min; " + _STAT, "never_default"),
    _p("RecentJobBusyTimeMin", "float seconds, last 20 min; " + _STAT, "never_default"),
    _p("JobDurationAvg", "float seconds: mean JobDuration of final updates; " + _STAT,
       "never_default"),
    _p("JobDurationCount", "int; " + _STAT, "never_default"),
    _p("JobDurationMax", "float seconds; " + _STAT, "never_default"),
    _p("JobDurationMin", "float seconds; " + _STAT, "never_default"),
    _p("RecentJobDurationAvg", "float seconds, last 20 min; " + _STAT, "never_default"),
    _p("RecentJobDurationCount", "int, last 20 min; " + _STAT, "never_default"),
    _p("RecentJobDurationMax", "float seconds, last 20 min; " + _STAT, "never_default"),
    _p("RecentJobDurationMin", "float seconds, last 20 min; " + _STAT, "never_default"),
    _p("JobPreemptions",
       "int: startd-wide count of preempted jobs (StartdStats stats_entry_recent, published with "
       "its Recent form by ResMgr::publish_resmgr_dynamic), 0 at start", "always"),
    _p("JobRankPreemptions", "int: startd-wide rank preemptions (StartdStats)", "always"),
    _p("JobStarts", "int: startd-wide job starts (StartdStats)", "always"),
    _p("JobUserPrioPreemptions", "int: startd-wide user-priority preemptions (StartdStats)",
       "always"),
    _o("JobVM_VCPUS", VM_UNIVERSE, "VMStarterInfo::publishVMInfo from Claim::publish"),
    _p("KeyboardIdle",
       "int seconds: keyboard/tty idle for slots <= SLOTS_CONNECTED_TO_KEYBOARD, else startd "
       "lifetime + boost (ResMgr::assign_idle_to_slots, CpuAttributes::publish_dynamic)", "always"),
    _p("KFlops",
       "int: condor_kflops benchmark result, published by the benchmark job's ad "
       "(StartdBenchJob::Publish -> ResMgr::adlist_replace -> adlist_publish)", "condition",
       "only after benchmarks ran (default RunBenchmarks = LastBenchmark == 0, i.e. once at start); "
       "MachAttributes::m_kflops is never set so publish_common_dynamic never emits it"),
    _p("LastDrainStartTime", "int epoch: last ResMgr::startDraining (publish_draining_attrs, when != 0)",
       "draining"),
    _p("LastDrainStopTime",
       "int epoch: last cancelDraining / drain completion (publish_draining_attrs, when != 0)",
       "draining", "appears only once a drain has been stopped"),
    _p("LastHeardFrom",
       "int epoch: inserted by the collector; the startd itself sets it (and DaemonStartTime) "
       "when answering a direct query (Resource::publish_single_slot_ad last_heard_from)", "always",
       "not in the startd's own update ad; present in collector copies and direct-query replies"),
    _p("LoadAvg",
       "float (2 decimals): owner + HTCondor load assigned to this slot "
       "(CpuAttributes::publish_dynamic)", "always"),
    _o("LvmUsingLoopback", LVM, "VolumeManager::AdvertiseInfo"),
    _o("LvmBackingStore", LVM, "VolumeManager::AdvertiseInfo"),
    _o("LvmIsThinProvisioning", LVM, "VolumeManager::AdvertiseInfo"),
    _o("LvmDetectedDisk", LVM, "VolumeManager::PublishDiskInfo, daemon ad only"),
    _o("LvmNonCondorDiskUsage", LVM, "VolumeManager::PublishDiskInfo, daemon ad only"),
    _p("Machine", "string: local FQDN (DaemonCore::publish)", "always"),
    _p("MachineMaxVacateTime",
       "expression: MACHINE_MAX_VACATE_TIME, default 10 * 60 (caInsert from the config ad in "
       "Resource::publish_dynamic)", "always"),
    _p("MaxClaimTime",
       "int seconds: MAX_PARTITIONABLE_SLOT_CLAIM_TIME (default 3600) on p-slots "
       "(Resource::publish_static)", "never_default",
       "only when ENABLE_CLAIMABLE_PARTITIONABLE_SLOTS = true (default false)"),
    _p("MaxJobRetirementTime",
       "expression: MAXJOBRETIREMENTTIME or the drain override; 0 when unset "
       "(Resource::publish_dynamic, process_update_ad)", "always"),
    _p("Memory", "int MiB: memory in the slot, remaining for a p-slot (CpuAttributes::publish_static)",
       "always"),
    _p("Mips",
       "int: condor_mips benchmark result (benchmark job ad via ResMgr::adlist_publish)",
       "condition", "only after benchmarks ran, see KFlops"),
    _p("MonitorSelfAge", "int seconds: startd age (SelfMonitorData::ExportData)", "always"),
    _p("MonitorSelfCPUUsage", "float percent (SelfMonitorData::ExportData)", "always"),
    _p("MonitorSelfImageSize", "int KiB (SelfMonitorData::ExportData)", "always"),
    _p("MonitorSelfRegisteredSocketCount", "int (SelfMonitorData::ExportData)", "always"),
    _p("MonitorSelfResidentSetSize", "int KiB (SelfMonitorData::ExportData)", "always"),
    _p("MonitorSelfSecuritySessions", "int (SelfMonitorData::ExportData)", "always"),
    _p("MonitorSelfTime", "int epoch of the last self-monitor sample (SelfMonitorData::ExportData)",
       "always"),
    _p("MyAddress", "string: public sinful of the startd (DaemonCore::publish)", "always"),
    _p("MyCurrentTime",
       "int epoch: ResMgr cur_time of this publication (Resource::publish_dynamic, "
       "ResMgr::publish_resmgr_dynamic)", "always"),
    _p("MyType", "string \"Machine\" (STARTD_SLOT_ADTYPE == STARTD_OLD_ADTYPE, Resource::publish_static)",
       "always"),
    _p("Name", "string: \"slot<N>[_<M>]@<host or STARTD_NAME>\" (Resource::publish_static)",
       "always"),
    _o("OfflineUniverses", VM_UNIVERSE,
       "ResMgr::updateExtrasClassAd, only after a starter reports a universe (VM, or Docker) "
       "offline through CA_UPDATE_MACHINE_AD"),
    _p("OpSys", "string: \"LINUX\" (MachAttributes::publish_static)", "always"),
    _p("OpSysAndVer", "string: e.g. \"AlmaLinux9\" (MachAttributes::publish_static)", "always"),
    _p("OpSysLegacy", "string: \"LINUX\" (MachAttributes::publish_static)", "always"),
    _p("OpSysLongName", "string: distribution description (MachAttributes::publish_static)", "always"),
    _p("OpSysMajorVer", "int: distribution major version (MachAttributes::publish_static)", "always"),
    _p("OpSysName", "string: distribution name (MachAttributes::publish_static)", "always"),
    _p("OpSysShortName", "string: short distribution name (MachAttributes::publish_static)", "always"),
    _p("OpSysVer", "int: version * 100 + minor (MachAttributes::publish_static)", "always"),
    _p("PartitionableSlot", "bool True in partitionable slots (Resource::publish_static)", "pslot"),
    _p("RecentJobPreemptions", "int: JobPreemptions in the last 20 min (StartdStats Recent form)",
       "always"),
    _p("RecentJobRankPreemptions", "int: last 20 min (StartdStats Recent form)", "always"),
    _p("RecentJobStarts", "int: last 20 min (StartdStats Recent form)", "always"),
    _p("RecentJobUserPrioPreemptions", "int: last 20 min (StartdStats Recent form)", "always"),
    _p("Requirements",
       "expression: START && WithinResourceLimits (or the SLOT_REQUIREMENTS_CLAUSES join); False "
       "when draining without a draining START; the broken reason string on broken slots "
       "(Resource::publish_requirements)", "always"),
    _p("RetirementTimeRemaining",
       "int seconds: Resource::evalRetirementRemaining() (Resource::publish_dynamic)", "always",
       "published in every slot, 0 when nothing runs"),
    _o("SingularityVersion", CONTAINERS),
    _o("SingularityUserNamespaces", CONTAINERS),
    _p("SlotBrokenCode", "int 1..6: why the slot is broken (CpuAttributes::publish_static)",
       "condition", "broken slots only"),
    _p("SlotBrokenReason", "string: why the slot is broken (CpuAttributes::publish_static)",
       "condition", "broken slots only"),
    _p("SlotID", "int: slot number N (Resource::publish_static)", "always"),
    _p("SlotType",
       "string: \"Static\", \"Partitionable\" or \"Dynamic\" (Resource::publish_static)", "always",
       "the reference only names the p-slot and d-slot values"),
    _p("SlotWeight", "expression: SLOT_WEIGHT, default Cpus (Resource::publish_static)", "always"),
    _p("StartdIpAddr",
       "string: sinful of the startd (Resource::publish_static, MachAttributes::publish_static)",
       "always"),
    _p("State",
       "string: Owner/Unclaimed/Matched/Claimed/Preempting/Drained/Backfill (ResState::publish)",
       "always"),
    _p("Start",
       "expression: START (default true), the draining START expression while draining "
       "(Resource::publish_requirements)", "always",
       "omitted on broken, COD and drained-without-start slots"),
    _p("TargetType", "string \"Job\" (Resource::publish_static)", "always"),
    _p("TotalCondorLoadAvg",
       "float: machine-wide HTCondor load (MachAttributes::publish_common_dynamic)", "always"),
    _p("TotalCpus", "int/float: machine cpus (MachAttributes::publish_static)", "always"),
    _p("TotalDisk",
       "int KiB: provisionable disk of the slot's execute volume (MachAttributes::publish_static)",
       "always"),
    _p("TotalLoadAvg", "float: machine load average (MachAttributes::publish_common_dynamic)",
       "always"),
    _p("TotalMachineDrainingBadput",
       "int cpu-seconds lost to drain evictions (ResMgr::publish_draining_attrs, when != 0)",
       "draining", "only after a drain evicted a running job"),
    _p("TotalMachineDrainingUnclaimedTime",
       "int cpu-seconds left unclaimed by draining (ResMgr::publish_draining_attrs, when != 0)",
       "draining"),
    _p("TotalMemory", "int MiB: machine memory (MachAttributes::publish_static)", "always"),
    _p("TotalSlotCpus",
       "int/float: cpus given to the slot less BrokenSlotCpus (CpuAttributes::publish_static)",
       "always"),
    _p("BrokenSlotCpus",
       "int/float: cpus a p-slot lost to deleted broken d-slots (CpuAttributes::publish_static)",
       "condition", "p-slot after a broken d-slot was deleted"),
    _p("TotalSlotDisk",
       "float KiB: disk given to the slot less BrokenSlotDisk (CpuAttributes::publish_static)",
       "always"),
    _p("BrokenSlotDisk", "KiB lost to deleted broken d-slots (CpuAttributes::publish_static)",
       "condition", "p-slot after a broken d-slot was deleted"),
    _p("TotalSlotMemory",
       "int MiB: memory given to the slot less BrokenSlotMemory (CpuAttributes::publish_static)",
       "always"),
    _p("BrokenSlotMemory", "int MiB lost to deleted broken d-slots (CpuAttributes::publish_static)",
       "condition", "p-slot after a broken d-slot was deleted"),
    _p("TotalSlots", "int: number of slots incl. d-slots (ResMgr::publish_resmgr_dynamic)", "always"),
    _o("TotalTimeBackfillBusy", OBSOLETE, _BF),
    _o("TotalTimeBackfillIdle", OBSOLETE, _BF),
    _o("TotalTimeBackfillKilling", OBSOLETE, _BF),
    _p("TotalTimeClaimedBusy", "int seconds in Claimed/Busy; " + _TT, "busy"),
    _p("TotalTimeClaimedCleaning", "int seconds in Claimed/Cleaning; " + _TT, "after_job"),
    _p("TotalTimeClaimedIdle", "int seconds in Claimed/Idle; " + _TT, "claimed"),
    _p("TotalTimeClaimedRetiring", "int seconds in Claimed/Retiring; " + _TT, "draining",
       "graceful drain (or preemption with retirement time) of a busy slot"),
    _p("TotalTimeClaimedSuspended", "int seconds in Claimed/Suspended; " + _TT, "configured",
       "needs a SUSPEND/WANT_SUSPEND policy that suspends a running job"),
    _p("TotalTimeMatchedIdle", "int seconds in Matched/Idle; " + _TT, "condition",
       "only if the negotiator's MATCH_INFO arrived before the claim"),
    _p("TotalTimeOwnerIdle", "int seconds in Owner/Idle; " + _TT, "configured",
       "needs START (or IS_OWNER) False long enough to accumulate >= 1 s"),
    _p("TotalTimePreemptingKilling", "int seconds in Preempting/Killing; " + _TT, "condition",
       "fast vacate, KILL true, WANT_VACATE false or vacate timeout"),
    _p("TotalTimePreemptingVacating", "int seconds in Preempting/Vacating; " + _TT, "preempting"),
    _p("TotalTimeUnclaimedBenchmarking", "int seconds in Unclaimed/Benchmarking; " + _TT,
       "condition", "only if benchmarks took >= 1 s"),
    _p("TotalTimeUnclaimedIdle", "int seconds in Unclaimed/Idle; " + _TT, "always",
       "a slot that was Unclaimed for >= 1 s (d-slots are claimed at creation and may lack it)"),
    _o("TotalTransferInputMB", DAEMON_AD_ONLY, "ResMgr::publish_daemon_ad (bytes_recvd.Total())"),
    _o("TotalTransferOutputMB", DAEMON_AD_ONLY, "ResMgr::publish_daemon_ad (bytes_sent.Total())"),
    _p("UidDomain", "string: UID_DOMAIN (MachAttributes::publish_static)", "always"),
    _p("VirtualMemory", "int KiB: swap share of the slot (CpuAttributes::publish_static)", "always"),
    _o("VM_AvailNum", VM_UNIVERSE, "VMUniverseMgr::publish"),
    _o("VM_Guest_Mem", VM_UNIVERSE, "VMStarterInfo::publishVMInfo"),
    _o("VM_Memory", VM_UNIVERSE, "VMUniverseMgr::publish"),
    _o("VM_Networking", VM_UNIVERSE, "VMUniverseMgr::publish"),
    _o("VM_Type", VM_UNIVERSE, "VMUniverseMgr::publish (vm-gahp info)"),
    _o("VMOfflineReason", VM_UNIVERSE, "starter -classad / ResMgr::updateExtrasClassAd"),
    _o("VMOfflineTime", VM_UNIVERSE, "ResMgr::updateExtrasClassAd (<Universe>OfflineTime)"),
    _o("WindowsBuildNumber", WINDOWS, "MachAttributes::publish_static under #if defined(WIN32)"),
    _o("WindowsMajorVersion", WINDOWS, "MachAttributes::publish_static under #if defined(WIN32)"),
    _o("WindowsMinorVersion", WINDOWS, "MachAttributes::publish_static under #if defined(WIN32)"),
    # --- inserted while Claimed -----------------------------------------------------------------
    _p("ClientMachine",
       "string: IP/host of the claiming schedd (command.cpp request_claim sets c_host; "
       "Claim::publish)", "claimed"),
    _p("RemoteAutoregroup",
       "bool: copied from the claim request's RemoteAutoregroup (Claim::loadRequestInfo; "
       "published together with RemoteNegotiatingGroup by Claim::publish)", "claimed",
       "negotiated claims: the schedd copies it from the match ad"),
    _p("RemoteGroup",
       "string: submitter's accounting group from the claim request (Claim::loadRequestInfo, "
       "Claim::publish)", "claimed", "negotiated claims: the schedd copies it from the match ad"),
    _p("RemoteNegotiatingGroup",
       "string: group the match was negotiated under, \"<none>\" for none "
       "(Claim::loadRequestInfo, Claim::publish)", "claimed",
       "negotiated claims: the schedd copies it from the match ad"),
    _p("RemoteOwner", "string: request ad's User (command.cpp, Claim::publish)", "claimed"),
    _p("RemoteUser", "string: same as RemoteOwner (command.cpp, Claim::publish)", "claimed"),
    _p("RemoteProject",
       "string: request ad's ProjectName (command.cpp, Claim::publish)", "condition",
       "only when the claiming job has ProjectName"),
    _p("RemoteScheddName", "string: name of the claiming schedd (Claim::publish)", "claimed"),
    _p("PreemptingOwner", "string: owner of the preempting claim (Claim::publishPreemptingClaim)",
       "preempting"),
    _p("PreemptingUser", "string: user of the preempting claim (Claim::publishPreemptingClaim)",
       "preempting"),
    _p("PreemptingRank", "float: Rank of the preempting claim's job (Claim::publishPreemptingClaim)",
       "preempting"),
    _p("TotalClaimRunTime",
       "int seconds the claim's jobs spent running (Claim::publishStateTimes, when > 0)", "busy"),
    _p("TotalClaimSuspendTime",
       "int seconds the claim's jobs were suspended (Claim::publishStateTimes, when > 0)",
       "configured", "needs a suspending policy"),
    _p("TotalJobRunTime",
       "int seconds the current job ran (Claim::publishStateTimes, when > 0)", "busy"),
    _p("TotalJobSuspendTime",
       "int seconds the current job was suspended (Claim::publishStateTimes, when > 0)",
       "configured", "needs a suspending policy"),
    # --- inserted while a job runs ---------------------------------------------------------------
    _p("JobId", "string \"<cluster>.<proc>\" (Claim::cacheJobInfo at activation, Claim::publish)",
       "busy"),
    _p("JobStart", "int epoch the job started (Claim::publish, c_job_start)", "busy"),
    _p("LastPeriodicCheckpoint", "int epoch of the last periodic checkpoint (Claim::publish)",
       "configured", "only when PERIODIC_CHECKPOINT fired for the running job"),
    # --- offline ads ---------------------------------------------------------------------------
    _o("MachineLastMatchTime", COLLECTOR_ADDED,
       "set by the negotiator on offline ads (matchmaker.cpp); the startd only references it in "
       "its default Unhibernate expression"),
    _o("Offline", COLLECTOR_ADDED, "collector offline plugin (offline_plugin.cpp)"),
    _p("Unhibernate",
       "expression: UNHIBERNATE, default MY.MachineLastMatchTime =!= UNDEFINED "
       "(ResMgr::init_config_classad, caInsert in Resource::publish_static; HAVE_HIBERNATION)",
       "always"),
    # --- custom resources ------------------------------------------------------------------------
    _p("Assigned<name>",
       "string: comma list of the resource ids bound to the slot (CpuAttributes::publish_static)",
       "custom_resource",
       "only for resources defined by an id list (non-fungible, e.g. MACHINE_RESOURCE_Foo = a, b) "
       "and when the slot holds at least one id; not for a plain count such as "
       "MACHINE_RESOURCE_Tokens = 4"),
    _p("Offline<name>",
       "string: comma list of offline ids (MachAttributes::publish_common_dynamic)", "configured",
       "only when some ids are offline (OFFLINE_MACHINE_RESOURCE_<name> or runtime offline)"),
    _p("Total<name>",
       "int (float if fractional): machine total of the resource (MachAttributes::publish_static)",
       "custom_resource"),
    _o("<name>BoardTempC", GPU_PROPERTIES, _GPU),
    _o("<name>Capability", GPU_PROPERTIES, _GPU),
    _o("<name>ClockMhz", GPU_PROPERTIES, _GPU),
    _o("<name>ComputeUnits", GPU_PROPERTIES, _GPU),
    _o("<name>CoresPerCU", GPU_PROPERTIES, _GPU),
    _o("<name>DeviceName", GPU_PROPERTIES, _GPU),
    _o("<name>DieTempC", GPU_PROPERTIES, _GPU),
    _o("<name>DriverVersion", GPU_PROPERTIES, _GPU),
    _o("<name>ECCEnabled", GPU_PROPERTIES, _GPU),
    _o("<name>EccErrorsDoubleBit", GPU_PROPERTIES, _GPU),
    _o("<name>EccErrorsSingleBit", GPU_PROPERTIES, _GPU),
    _o("<name>FanSpeedPct", GPU_PROPERTIES, _GPU),
    _o("<name>GlobalMemoryMb", GPU_PROPERTIES, _GPU),
    _o("<name>NvidiaDriver", GPU_PROPERTIES, _GPU),
    _o("<name>OpenCLVersion", GPU_PROPERTIES, _GPU),
    _o("<name>RuntimeVersion", GPU_PROPERTIES, _GPU),
    _o("DeviceGPUsAverageUsage", GPU_PROPERTIES,
       "Resource::process_update_ad from the GPU monitor's Uptime* startd cron metrics"),
    _o("DeviceGPUsMemoryPeakUsage", GPU_PROPERTIES,
       "Resource::process_update_ad renames Uptime<res>PeakUsage"),
    # --- partitionable-slot rollup ---------------------------------------------------------------
    _p("ChildAccountingGroup", "list of d-slot AccountingGroup; " + _CHILD, "pslot"),
    _p("ChildActivity", "list of d-slot Activity; " + _CHILD, "pslot"),
    _p("ChildCpus", "list of d-slot Cpus; " + _CHILD, "pslot"),
    _p("ChildCurrentRank", "list of d-slot CurrentRank; " + _CHILD, "pslot"),
    _p("ChildEnteredCurrentState", "list of d-slot EnteredCurrentState; " + _CHILD, "pslot"),
    _p("ChildMemory", "list of d-slot Memory; " + _CHILD, "pslot"),
    _p("ChildName", "list of d-slot Name; " + _CHILD, "pslot"),
    _p("ChildRemoteOwner", "list of d-slot RemoteOwner; " + _CHILD, "pslot"),
    _p("ChildRemoteUser", "list of d-slot RemoteUser; " + _CHILD, "pslot"),
    _p("ChildRetirementTimeRemaining", "list of d-slot RetirementTimeRemaining; " + _CHILD, "pslot"),
    _p("ChildState", "list of d-slot State; " + _CHILD, "pslot"),
    _p("PslotRollupInformation",
       "bool True when ADVERTISE_PSLOT_ROLLUP_INFORMATION (default true): p-slots "
       "(publishDynamicChildSummaries) and d-slots (Resource::publish_static)", "pslot",
       "also in every d-slot"),
    # --- ClassAd environment ---------------------------------------------------------------------
    _o("CurrentTime", OBSOLETE,
       "never an attribute of the slot ad in 25: a ClassAd-library alias for time() "
       "(classad.cpp ClassAd::LookupInScope, registered by SetOldClassAdSemantics); no C++ in the "
       "startd assigns it"),
    # --- common cloud attributes -----------------------------------------------------------------
    _o("CloudImage", CLOUD),
    _o("CloudVMType", CLOUD),
    _o("CloudRegion", CLOUD),
    _o("CloudZone", CLOUD),
    _o("CloudProvider", CLOUD),
    _o("CloudPlatform", CLOUD),
    _o("CloudInstanceID", CLOUD),
    _o("CloudInterruptible", CLOUD),
)


EXTRA_PUBLISHED: tuple[Attr, ...] = (
    # Resource::publish_static / DaemonCore::publish / config_fill_ad
    _p("HasStartDaemonAd", "bool True when the startd sends a StartD daemon ad "
       "(Resource::publish_static, enable_single_startd_daemon_ad; ENABLE_STARTD_DAEMON_AD=auto)",
       "always", "absent only when every collector is older than 23.2"),
    _p("IsLocalStartd", "bool: IS_LOCAL_STARTD, default False (Resource::publish_static)", "always"),
    _p("Rank", "expression: RANK, default 0.0 (Resource::publish_static)", "always"),
    _p("CpuBusy", "expression: CPU_BUSY, default False (Resource::publish_static)", "always"),
    _p("SlotTypeID", "int: SLOT_TYPE_<N> number, 0 for the default type (Resource::publish_static)",
       "always"),
    _p("ParentSlotId", "int: the parent p-slot's SlotID (Resource::publish_static)", "dslot"),
    _p("DSlotId", "int: the d-slot sub-id M of slotN_M (Resource::publish_static)", "dslot"),
    _p("BackfillSlot", "bool True: SLOT_TYPE_<N>_BACKFILL (Resource::publish_static)", "configured"),
    _p("MachineResources", "string: \"Cpus Memory Disk Swap\" plus custom resource names "
       "(MachAttributes::publish_static)", "always"),
    _p("ExecuteVolume", "string: partition id of the slot's EXECUTE (MachAttributes::publish_static)",
       "always"),
    _p("CondorScratchDir", "string \"#CoNdOrScRaTcHdIr#\" placeholder (MachAttributes::publish_static)",
       "always"),
    _p("HasIOProxy", "bool True (MachAttributes::publish_static)", "always"),
    _p("UtsnameSysname", "string: uname sysname (MachAttributes::publish_static, non-Windows)",
       "always"),
    _p("UtsnameNodename", "string: uname nodename", "always"),
    _p("UtsnameRelease", "string: uname release", "always"),
    _p("UtsnameVersion", "string: uname version", "always"),
    _p("UtsnameMachine", "string: uname machine", "always"),
    _p("has_avx512_vnni", "bool True: cpu flag avx512_vnni (sysapi_processor_flags, "
       "MachAttributes::publish_static)", "condition"),
    _p("Detected<name>", "int/float: detected quantity of a custom resource "
       "(MachAttributes::publish_static)", "custom_resource"),
    _p("TotalSlot<name>", "int: custom resource given to the slot (CpuAttributes::publish_static)",
       "custom_resource"),
    _p("<name>", "int: custom resource quantity in the slot, remaining for a p-slot "
       "(CpuAttributes::publish_static)", "custom_resource"),
    _p("Available<name>", "list of available id attribute names (MachAttributes::publish_slot_dynamic)",
       "custom_resource", "non-fungible (id list) resources only"),
    _p("CondorPlatform", "string \"$CondorPlatform: ... $\" (config_fill_ad)", "always"),
    _p("AddressV1", "string: v1 form of MyAddress (DaemonCore::publish)", "always"),
    _p("COLLECTOR_HOST_STRING", "string: $(COLLECTOR_HOST) via SYSTEM_STARTD_ATTRS (config_fill_ad, "
       "Resource::publish_static)", "always", "absent if COLLECTOR_HOST is unset"),
    # Starter::publish (condor_starter -classad)
    _p("StarterAbilityList", "string: comma list of the starter ad's Has* names (Starter::publish)",
       "always"),
    _p("HasJobDeferral", "bool True; " + _STARTER, "always"),
    _p("HasReconnect", "bool True; " + _STARTER, "always"),
    _p("HasTDP", "bool True; " + _STARTER, "always"),
    _p("HasPerFileEncryption", "bool True; " + _STARTER, "always"),
    _p("HasJICLocalConfig", "bool True; " + _STARTER, "always"),
    _p("HasJICLocalStdin", "bool True; " + _STARTER, "always"),
    _p("HasJobTransferPlugins", "bool True when ENABLE_URL_TRANSFERS (default true); " + _STARTER,
       "always"),
    _p("HasTransferInputRemaps", "bool True; " + _STARTER, "always"),
    _p("HasOsUser", "bool True; " + _STARTER, "always"),
    _p("HasJobNetworking", "bool: not NO_JOB_NETWORKING; " + _STARTER, "always"),
    _p("HasCommonFilesTransfer", "int CFT_VERSION 2 on Linux; " + _STARTER, "always",
       "dropped when STARTD_ENFORCE_DISK_LIMITS without ALLOW_COMMON_FILES_ON_LVS"),
    _p("MappingMethod", "string: StagingDirectoryFactory type; " + _STARTER, "always",
       "same condition as HasCommonFilesTransfer"),
    # Resource::publish_dynamic and what it calls
    _p("TotalVirtualMemory", "int KiB: machine swap (MachAttributes::publish_common_dynamic)",
       "always"),
    _p("LastBenchmark", "int epoch of the last benchmark, 0 before (publish_common_dynamic)",
       "always"),
    _p("TimeToLive", "int seconds until the startd's own shutdown, 0 = none "
       "(ResMgr::publish_resmgr_dynamic)", "always"),
    _p("HibernationLevel", "int 0 (HibernationManager::publish)", "always"),
    _p("HibernationState", "string \"NONE\"/\"S3\"... target state (HibernationManager::publish)",
       "always"),
    _p("HibernationSupportedStates", "string (HibernationManager::publish)", "always"),
    _p("HardwareAddress", "string MAC of the primary adapter (NetworkAdapterBase::publish)", "always"),
    _p("SubnetMask", "string (NetworkAdapterBase::publish)", "always"),
    _p("IsWakeOnLanSupported", "bool (NetworkAdapterBase::publish)", "always"),
    _p("IsWakeOnLanEnabled", "bool (NetworkAdapterBase::publish); the reference calls it "
       "IsWakeEnabled", "always"),
    _p("WakeOnLanSupportedFlags", "string (NetworkAdapterBase::publish)", "always"),
    _p("WakeOnLanEnabledFlags", "string (NetworkAdapterBase::publish)", "always"),
    _p("ClaimRequests", "int: startd-wide claim requests (StartdStats)", "always"),
    _p("RecentClaimRequests", "int: last 20 min (StartdStats)", "always"),
    _p("ActivationRequests", "int: startd-wide activation requests (StartdStats)", "always"),
    _p("RecentActivationRequests", "int: last 20 min (StartdStats)", "always"),
    _p("NewDSlotNotMatch", "int: d-slot creations refused (StartdStats)", "always"),
    _p("RecentNewDSlotNotMatch", "int: last 20 min (StartdStats)", "always"),
    _p("DrainReason", "string: reason of the drain request (ResMgr::publish_draining_attrs)",
       "draining"),
    _p("NumDynamicSlotsTime", "int epoch NumDynamicSlots last changed (Resource::publish_latches, "
       "SYSTEM_STARTD_LATCH_EXPRS = NumDynamicSlots)", "pslot"),
    _p("EnteredCurrentState", "int epoch the State last changed (ResState::publish)", "always"),
    _p("TotalTimeDrainedIdle", "int seconds in Drained/Idle; " + _TT, "draining"),
    _p("TotalTimeDrainedRetiring", "int seconds in Drained/Retiring; " + _TT, "draining"),
    _p("WithinResourceLimits", "expression: request fits the slot (Resource::publish_requirements)",
       "always"),
    _p("LastFetchWorkSpawned", "int epoch, 0 (Resource::publish_dynamic, HAVE_JOB_HOOKS)", "always"),
    _p("LastFetchWorkCompleted", "int epoch, 0 (Resource::publish_dynamic, HAVE_JOB_HOOKS)", "always"),
    _p("NextFetchWorkDelay", "int, -1 (Resource::publish_dynamic, HAVE_JOB_HOOKS)", "always"),
    _p("NumPids", "int: job process count from the starter (Claim::publish)", "claimed"),
    _p("AccountingGroup", "string: claim's accounting group @ uid domain (Claim::publish)",
       "condition", "only when the claim request carries AccountingGroup"),
    _p("ConcurrencyLimits", "string (Claim::publish)", "condition",
       "only when the job has concurrency limits"),
    _p("GlobalJobId", "string (Claim::cacheJobInfo, Claim::publish)", "busy"),
    _p("ImageSize", "int KiB: job image size (Claim::publish while active)", "busy"),
    _p("CpusUsage", "float: job cpu usage (Claim::publish while active)", "busy"),
    _p("PublicClaimId", "string: public part of the claim id (Resource::publish_dynamic)", "claimed"),
    _p("JobPid", "int: job pid from the starter's update ad (Resource::publish_dynamic)", "busy",
       "after the starter's first update"),
    _p("StarterPid", "int (Resource::publish_dynamic)", "busy"),
    _p("PreemptingAccountingGroup", "string (Claim::publishPreemptingClaim)", "condition",
       "preempting claim with an accounting group"),
    _p("IsSplittable", "bool True: d-slot holding a split claim (Claim::publish)", "condition"),
    _p("WantMatching", "bool: claimed p-slot (Claim::publish)", "never_default",
       "ENABLE_CLAIMABLE_PARTITIONABLE_SLOTS"),
    _p("NumClaims", "int (Resource::publish_dynamic, consumption policy p-slots)", "configured",
       "CONSUMPTION_POLICY = true"),
    _p("ConsumptionCpus", "expression (Resource::publish_static, consumption policy)", "configured",
       "CONSUMPTION_POLICY = true; also ConsumptionMemory, ConsumptionDisk, Consumption<name>"),
    _p("DaemonCoreDutyCycle", "float (DaemonCore::Stats::Publish)", "always"),
    _p("RecentDaemonCoreDutyCycle", "float (DaemonCore::Stats::Publish)", "always"),
    _p("NumDynamicSlots", "int: d-slot count (Resource::publishDynamicChildSummaries)", "pslot"),
    _p("ChildDSlotId", "list of d-slot DSlotId; " + _CHILD, "pslot"),
    _p("ChildDisk", "list of d-slot Disk; " + _CHILD, "pslot"),
    _p("Child<name>", "list of d-slot custom resource quantities; " + _CHILD, "pslot"),
    _p("DaemonStartTime", "int epoch: set for direct queries (Resource::publish_single_slot_ad) and "
       "by DCCollector::sendUpdate on every update", "always"),
    _p("DaemonLastReconfigTime", "int epoch (DCCollector::sendUpdate)", "always",
       "collector copy only"),
    _p("UpdateSequenceNumber", "int (DCCollector::sendUpdate)", "always", "collector copy only"),
)

# Counts (computed from the tables above):
# ATTRIBUTES: 243 = 174 published + 69 out
#   published by when: always 83, condition 26, never_default 17, pslot 13, claimed 9,
#                      draining 7, configured 6, busy 5, preempting 4, custom_resource 2,
#                      dslot 1, after_job 1, pslot_with_children 0
#   out by reason: gpu_properties 18, containers 9, vm_universe 9, cloud 8, lvm 7,
#                  daemon_ad_only 6, obsolete 6, windows 4, collector_added 2
# EXTRA_PUBLISHED: 88 (always 58, condition 5, pslot 5, busy 5, custom_resource 4,
#                  configured 3, draining 3, dslot 2, claimed 2, never_default 1)


# --- this startd's own decisions -----------------------------------------------------------------
# HTCondor 25 publishes these (scope "published" above); this startd leaves them out on purpose, and the
# coverage test holds it to that (a name here must be absent from every ad it builds).
STARTER_DOES_NOT = "this startd's starter runs the job in place: no file transfer, no ssh_to_job, no cgroup"
NOT_HERE: dict[str, str] = {
    "HasFileTransferPluginMethods": STARTER_DOES_NOT,
    "HasSelfCheckpointTransfers": STARTER_DOES_NOT,
    "HasSshd": STARTER_DOES_NOT,
    "CgroupEnforced": STARTER_DOES_NOT,
    "IsDataSlot": "data slots (command_data_slot, AP common files) are not modelled",
    "SlotBrokenCode": "broken slots (resources held by a starter that cannot be reaped) are not modelled",
    "SlotBrokenReason": "broken slots are not modelled",
    "BrokenSlotCpus": "broken slots are not modelled",
    "BrokenSlotDisk": "broken slots are not modelled",
    "BrokenSlotMemory": "broken slots are not modelled",
    "MaxClaimTime": "claimable partitionable slots (ENABLE_CLAIMABLE_PARTITIONABLE_SLOTS) are not modelled",
    "LastPeriodicCheckpoint": "no periodic checkpoints are taken (no standard or VM universe)",
}
# Out of scope for HTCondor 25 (its build has no BOINC backfill), published here because this startd
# models the Backfill state; they appear once a slot has spent time there.
HERE_TOO: dict[str, str] = {
    "TotalTimeBackfillBusy": "backfill",
    "TotalTimeBackfillIdle": "backfill",
    "TotalTimeBackfillKilling": "backfill",
}
NOT_HERE.update({
    "HasIOProxy": STARTER_DOES_NOT,
    "StarterAbilityList": STARTER_DOES_NOT,
    "HasJobDeferral": STARTER_DOES_NOT,
    "HasReconnect": STARTER_DOES_NOT,
    "HasTDP": STARTER_DOES_NOT,
    "HasPerFileEncryption": STARTER_DOES_NOT,
    "HasJICLocalConfig": STARTER_DOES_NOT,
    "HasJICLocalStdin": STARTER_DOES_NOT,
    "HasJobTransferPlugins": STARTER_DOES_NOT,
    "HasTransferInputRemaps": STARTER_DOES_NOT,
    "HasJobNetworking": STARTER_DOES_NOT,
    "HasCommonFilesTransfer": STARTER_DOES_NOT,
    "MappingMethod": STARTER_DOES_NOT,
    "StarterPid": "the daemon is its own starter: there is no separate starter process",
    "CondorScratchDir": "the $$(CondorScratchDir) placeholder only a condor_starter replaces",
    "ExecuteVolume": "one EXECUTE directory; execute partitions (volumes) are not modelled",
    "BackfillSlot": "backfill slots (SLOT_TYPE_<N>_BACKFILL) are not modelled",
    "HasStartDaemonAd": "the startd's daemon ad travels on its MQTT status topic, not to a collector",
    "AddressV1": "MyAddress names the broker; there is no CEDAR address to describe",
    "Available<name>": "per-device properties for evalInEachContext matching are not modelled",
    "WantMatching": "claimable partitionable slots are not modelled",
    "IsSplittable": "split claims (claimable partitionable slots) are not modelled",
    "DaemonCoreDutyCycle": "DaemonCore's event-loop statistics are not measured",
    "RecentDaemonCoreDutyCycle": "DaemonCore's event-loop statistics are not measured",
    "UpdateSequenceNumber": "collector update sequencing: ads travel as retained MQTT messages",
})
