"""The keywords condor_submit 25 knows (the SUBMIT_KEY_* and SUBMIT_CMD_* names of
src/condor_utils/submit_utils.h), lower-case. A key that is neither one of these nor referenced by a macro is
"unused" (``SubmitHash::warn_unused``); prefixes (``request_``, ``require_``, ``+``, ``MY.``) are matched by the
job ad builder itself.
"""

from __future__ import annotations

KNOWN_KEYWORDS = frozenset("""
    accounting_group accounting_group_user allowed_execute_duration allowed_job_duration allow_arguments_v1
    allow_environment_v1 append_files arc_application arc_data_staging arc_resources arc_rte arguments
    arguments2 aws_access_key_id_file aws_region aws_secret_access_key_file azure_admin_key azure_admin_username
    azure_auth_file azure_image azure_location azure_size batch_extra_submit_args batch_id batch_name
    batch_project batch_queue batch_runtime buffer_block_size buffer_files buffer_size checkpoint_destination
    checkpoint_exit_code cloud_label_names Cluster compress_files concurrency_limits concurrency_limits_expr
    container_image container_is_common container_service_names container_target_dir core_size cron_day_of_month
    cron_day_of_week cron_hour cron_minute cron_month cron_prep_time cron_window cuda_version dagman_job_id
    dagman_log deferral_prep_time deferral_time deferral_window delegate_job_gsi_credentials_lifetime
    description disk_usage docker_image docker_network_type docker_override_entrypoint docker_pull_policy
    docker_send_credentials dont_encrypt_input_files dont_encrypt_output_files ec2_access_key_id ec2_ami_id
    ec2_availability_zone ec2_block_device_mapping ec2_ebs_volumes ec2_elastic_ip ec2_iam_profile_arn
    ec2_iam_profile_name ec2_instance_type ec2_keypair ec2_keypair_file ec2_keyp_air ec2_key_pair_file
    ec2_parameter_names ec2_secret_access_key ec2_security_groups ec2_security_ids ec2_spot_price ec2_tag_names
    ec2_user_data ec2_user_data_file ec2_vpc_ip ec2_vpc_subnet email_attributes encrypt_execute_directory
    encrypt_input_files encrypt_output_files env environment environment2 erase_output_and_error_on_restart
    error executable exit_requirements fetch_files file_remaps gce_account gce_auth_file gce_image gce_json_file
    gce_machine_type gce_metadata gce_metadata_file gce_preemptible getenv get_env gpus_maximum_capability
    gpus_minimum_capability gpus_minimum_memory gpus_minimum_runtime grid_resource gs_access_key_id_file
    gs_secret_access_key_file hold hold_kill_sig image_size initialdir initial_dir input interactive_args
    interactive_executable jar_files java_vm_args java_vm_arguments java_vm_arguments2 jobset
    job_ad_information_attrs job_iwd job_lease_duration job_machine_attrs job_machine_attrs_history_length
    job_max_vacate_time keep_claim_idle kill_sig kill_sig_timeout leave_in_queue load_profile local_files log
    log_xml machine_count manifest manifest_dir match_list_length materialize_max_idle max_idle
    max_job_retirement_time max_materialize max_retries max_transfer_input_mb max_transfer_output_mb
    memory_usage mount_under_scratch next_job_start_delay nice_user NodeCount node_count noop_job
    noop_job_exit_code noop_job_exit_signal notification notify_user on_evict_checks on_exit_hold
    on_exit_hold_reason on_exit_hold_subcode on_exit_remove output output_destination output_directory
    parallel_script_shadow parallel_script_starter periodic_hold periodic_hold_reason periodic_hold_subcode
    periodic_release periodic_remove periodic_vacate preferences preserve_relative_paths primary_unix_group prio
    priority Process project_name public_input_files rank remote_initialdir remove_kill_sig rendezvousdir
    request_cpus request_disk request_gpus request_memory requirements require_gpus retry_request_disk
    retry_request_memory retry_request_memory_increase retry_request_memory_max retry_until run_as_owner
    s3_access_key_id_file s3_secret_access_key_file scitokens_file send_credential shell should_transfer_files
    skip_filechecks skip_if_dataflow stack_size starter_debug starter_log stderr stdin stdout stream_error
    stream_input stream_output submit_event_notes submit_event_notes_attrs submit_event_user_notes
    success_exit_code suspend_job_at_exec tool_daemon_args tool_daemon_arguments tool_daemon_arguments2
    tool_daemon_cmd tool_daemon_error tool_daemon_input tool_daemon_output TransferInputFiles
    TransferOutputFiles transfer_checkpoint_files transfer_common_input transfer_container transfer_error
    transfer_executable transfer_input transfer_input_files transfer_output transfer_output_files
    transfer_output_remaps transfer_plugins ulog_execute_attrs universe UseOAuthServices use_oauth_services
    use_scitoken use_scitokens use_x509userproxy vm_checkpoint vm_disk vm_macaddr vm_memory vm_networking
    vm_networking_type vm_no_output_vm vm_type vm_vcpus vm_vnc WantNameTag want_ads want_graceful_removal
    want_io_proxy want_job_networking when_to_transfer_output x509userproxy xen_initrd xen_kernel
    xen_kernel_params xen_root _container_port
""".lower().split())
