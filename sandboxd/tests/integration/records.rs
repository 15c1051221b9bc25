//! Records: ids the server assigns, used in the path or in a JSON body, and
//! the fault that loses the answer to a creation.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::{err_code, Server};

#[tokio::test]
async fn a_record_is_found_and_deleted_by_the_id_the_server_assigned() {
    let s = Server::start(&[]);
    let (st, made) = s.post("/api/records", json!({"name": "rec-a"})).await;
    assert_eq!(st, StatusCode::CREATED, "{made}");
    let id = made["id"].as_str().unwrap().to_owned();
    assert_ne!(id, "rec-a");
    let (st, v) = s.post("/api/records", json!({"name": "rec-a"})).await;
    assert_eq!((st, err_code(&v)), (StatusCode::CONFLICT, "conflict"));
    let (_, v) = s.post("/api/records", json!({"name": "rec-b"})).await;
    let other = v["id"].as_str().unwrap().to_owned();

    let (_, listed) = s.get("/api/records?prefix=rec-a").await;
    assert_eq!(listed["items"], json!([{"id": id, "name": "rec-a"}]));
    let (st, v) = s.get(&format!("/api/records/{id}")).await;
    assert_eq!((st, &v["name"]), (StatusCode::OK, &json!("rec-a")));
    let (st, v) = s.post("/api/records/lookup", json!({"id": id})).await;
    assert_eq!((st, &v["name"]), (StatusCode::OK, &json!("rec-a")));

    // The body is what says which record: none, or a wrong one, is refused.
    let (st, v) = s.call(Method::POST, "/api/records/delete", None).await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
    );
    let (st, v) = s
        .post("/api/records/lookup", json!({"name": "rec-a"}))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");

    let (st, _) = s.post("/api/records/delete", json!({"id": id})).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, v) = s.post("/api/records/lookup", json!({"id": id})).await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "no_record"));
    let (st, _) = s.delete(&format!("/api/records/{other}")).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, _) = s.get(&format!("/api/records/{other}")).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    let (_, listed) = s.get("/api/records?prefix=rec-").await;
    assert_eq!(listed["items"], json!([]));
}

#[tokio::test]
async fn drop_record_answer_makes_the_record_and_loses_only_the_first_answer() {
    let s = Server::start(&["--fault", "drop-record-answer=1"]);
    let lost = s
        .client
        .post(s.url("/api/records"))
        .json(&json!({"name": "lost"}))
        .send()
        .await;
    let answer = match lost {
        Err(e) => Err(e),
        Ok(response) => response.bytes().await,
    };
    assert!(answer.is_err(), "the first answer arrived: {answer:?}");
    let (_, listed) = s.get("/api/records?prefix=lost").await;
    let items = listed["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{listed}");
    assert!(
        s.log_text().contains(&format!(
            "created record \"lost\" (id {})",
            items[0]["id"].as_str().unwrap()
        )),
        "{}",
        s.log_text()
    );
    let (st, v) = s.post("/api/records", json!({"name": "answered"})).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert!(v["id"].is_string(), "{v}");
}
